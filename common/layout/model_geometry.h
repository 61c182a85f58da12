// The shape of a model's levels from its config alone (torch-free, so the
// launcher's tools can use it): the channels of every skip and of the
// bottleneck, the channels each decoder level puts out, which decoder levels
// have a head, and each level's downsampling per axis.
#pragma once

#include <cstdint>
#include <vector>

#include "common/config/config.h"

namespace up {

struct LevelGeometry {
  std::vector<int64_t> skip_channels;  // skip i, i = 0..L-1
  int64_t bottleneck_channels = 0;
  std::vector<int64_t> decoder_channels;  // decoder level i's output, i = 0..L-1
  std::vector<bool> head;                 // decoder level i has a head (level 0 always)
  std::vector<std::vector<int>> scale;    // scale[i][axis], i = 0..L (L: the bottleneck)
  int levels() const { return static_cast<int>(skip_channels.size()); }
};
LevelGeometry Geometry(const ModelConfig& model);

// What every patch axis must be a multiple of: the bottleneck's downsampling.
inline std::vector<int> PatchMultiple(const ModelConfig& model) {
  return Geometry(model).scale.back();
}

}  // namespace up
