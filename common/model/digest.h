// `param_digest`: sha256 over the raw bytes of every parameter and buffer,
// the encoder's in name order, then the decoder's in name order. Equal
// digests mean bit-identical models.
#pragma once

#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

namespace up {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

// Each list sorted by name (NamedState gives that order).
std::string ParamDigest(const NamedTensors& encoder, const NamedTensors& decoder);

}  // namespace up
