// See cuda_allocator_config.h.
#include "common/device/cuda_allocator_config.h"

#include <cstdlib>

namespace up {

void UseCudaAllocatorDefaults() {
  if (std::getenv("PYTORCH_ALLOC_CONF") != nullptr) return;  // the user's, under the newer name
  setenv(kCudaAllocConfVar, kCudaAllocConfDefault, /*overwrite=*/0);
}

std::string CudaAllocatorConfigText() {
  for (const char* name : {kCudaAllocConfVar, "PYTORCH_ALLOC_CONF"}) {
    if (const char* value = std::getenv(name)) return std::string(name) + "=" + value;
  }
  return "PYTORCH_CUDA_ALLOC_CONF unset (PyTorch's fixed-size segments)";
}

}  // namespace up
