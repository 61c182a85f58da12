// See mask_overlay.h.
#include "common/formats/mask_overlay.h"

#include <cmath>
#include <string>

#include "common/base/errors.h"

namespace up {

std::array<uint8_t, 3> ClassColour(int cls) {
  static constexpr std::array<std::array<uint8_t, 3>, 8> kColours{{{0, 0, 0},
                                                                   {230, 25, 75},
                                                                   {60, 180, 75},
                                                                   {255, 225, 25},
                                                                   {0, 130, 200},
                                                                   {245, 130, 48},
                                                                   {145, 30, 180},
                                                                   {70, 240, 240}}};
  if (cls <= 0) return kColours[0];
  return kColours[1 + (cls - 1) % (kColours.size() - 1)];
}

PngImage ColourOverlay(const PngImage& base, const std::vector<uint8_t>& mask, double alpha) {
  const size_t pixels = static_cast<size_t>(base.width) * base.height;
  if (mask.size() != pixels || base.pixels.size() != pixels * base.channels) {
    throw RuntimeError("ColourOverlay: mask of " + std::to_string(mask.size()) +
                       " pixels for an image of " + std::to_string(pixels));
  }
  PngImage out;
  out.width = base.width;
  out.height = base.height;
  out.channels = 3;
  out.pixels.resize(pixels * 3);
  const bool colour = base.channels >= 3;
  for (size_t p = 0; p < pixels; ++p) {
    const uint8_t* in = &base.pixels[p * base.channels];
    const std::array<uint8_t, 3> tint = ClassColour(mask[p]);
    for (int c = 0; c < 3; ++c) {
      const double v = colour ? in[c] : in[0];
      out.pixels[p * 3 + c] =
          static_cast<uint8_t>(mask[p] == 0 ? v : std::lround((1 - alpha) * v + alpha * tint[c]));
    }
  }
  return out;
}

}  // namespace up
