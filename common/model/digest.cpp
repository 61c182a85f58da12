// See digest.h.
#include "common/model/digest.h"

#include "common/base/sha256.h"

namespace up {

std::string ParamDigest(const NamedTensors& encoder, const NamedTensors& decoder) {
  Sha256 hash;
  for (const NamedTensors* list : {&encoder, &decoder}) {
    for (const auto& [name, tensor] : *list) {
      torch::Tensor t = tensor.detach().to(torch::kCPU).contiguous();
      hash.Update(t.data_ptr(), t.numel() * t.element_size());
    }
  }
  return ToHex(hash.Finish());
}

}  // namespace up
