// A TorchScript bundle (model.kind = torchscript, torchscript_bundle.h) built
// as the levels of UNetEncoder / UNetDecoder (unet.h): encoder level i is
// module `enc{i}` (the last, the bottleneck), decoder level i `dec{i}`, the
// head at level i `head{i}`; inside each, the names of the level's file.
// Weights are the bundle's (the user's own initialisation or training), not
// seeded.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/config/config.h"

namespace up {

class UNetEncoderImpl;
class UNetDecoderImpl;

void BuildBundleEncoder(UNetEncoderImpl* encoder, const ModelConfig& config);
void BuildBundleDecoder(UNetDecoderImpl* decoder, const ModelConfig& config);

// Loads every level of the bundle once and checks it against the manifest
// (the launcher's check before it starts any process): UsageError naming the
// file and the mismatch.
void CheckBundleLevels(const ModelConfig& config);

// (full name, key in the user's original model) for every parameter and
// buffer: `encoder.enc0.conv1.conv.weight` -> `input_block.conv1.conv.weight`,
// one pair per key (a tensor the user's model registers twice has two).
std::vector<std::pair<std::string, std::string>> BundleStateDictKeys(const ModelConfig& config);

}  // namespace up
