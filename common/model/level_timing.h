// Times each level of a U-Net half on a device, one micro-batch forward and
// backward, for `pipeline.balance: time` (common/layout/level_times.h). Each level
// runs as a one-level pipeline part would (MakeEncoderPart / MakeDecoderPart
// with the config's recompute unit and precision), on inputs of the real
// shapes: the encoder's each the level below's output, the decoder's the
// encoder's boundary; the decoder's level 0 with its head and the loss.
// One warm-up, then the median of `repeats` runs; a CUDA device is
// synchronised around each.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "common/config/config.h"

namespace up {

// Milliseconds per level: encoder levels 0..L, decoder levels by U-Net
// index 0..L-1.
std::vector<double> TimeEncoderLevels(const Config& config, const torch::Device& device,
                                      int repeats = 3);
std::vector<double> TimeDecoderLevels(const Config& config, const torch::Device& device,
                                      int repeats = 3);

}  // namespace up
