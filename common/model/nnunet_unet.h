// nnU-Net's two U-Nets (dynamic_network_architectures 0.4.4's PlainConvUNet
// and ResidualEncoderUNet) built as levels of UNetEncoder / UNetDecoder
// (unet.h), from the plan's architecture (nnunet_plans.h).
//
// Parameter and buffer names are the reference's own, as its
// named_parameters() lists them, relative to its `encoder` and `decoder`:
// `stages.0.0.convs.0.conv.weight`, `stem.convs.0.norm.bias`,
// `stages.2.blocks.1.conv2.conv.weight`, `transpconvs.0.weight`,
// `seg_layers.4.bias`, ... The aliases its state_dict() also holds (each
// block's `all_modules.*` and the decoder's `encoder.*`) are added by
// NnunetStateDictAliases, for export.
//
// Weights start as nnU-Net starts them: He-normal convolutions (negative
// slope 1e-2), zero biases, and in residual blocks the last norm zeroed.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/config/config.h"

namespace up {

class UNetEncoderImpl;
class UNetDecoderImpl;

void BuildNnunetEncoder(UNetEncoderImpl* encoder, const ModelConfig& config);
void BuildNnunetDecoder(UNetDecoderImpl* decoder, const ModelConfig& config);

// For each full name (`encoder.*`, `decoder.*`) that the reference's
// state_dict() holds twice, the pairs (alias, name): `...convs.0.all_modules.0.weight`
// for `...convs.0.conv.weight`, `decoder.encoder.X` for `encoder.X`.
std::vector<std::pair<std::string, std::string>> NnunetStateDictAliases(
    const ModelConfig& config, const std::vector<std::string>& names);

}  // namespace up
