// What `predict` writes for a person to look at: a predicted mask coloured
// over its input image. Torch-free; pure functions, thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "common/formats/png_io.h"

namespace up {

// A distinct RGB colour per class; class 0 (background) is not drawn.
std::array<uint8_t, 3> ClassColour(int cls);

// An RGB image: `base` (1-2 channels: the first as grey; 3-4: the first
// three as RGB) with each pixel whose class in `mask` (height*width class
// indices, row-major) is not 0 blended with its class colour at `alpha`.
// REQUIRES: mask.size() == base.width * base.height.
PngImage ColourOverlay(const PngImage& base, const std::vector<uint8_t>& mask, double alpha = 0.5);

}  // namespace up
