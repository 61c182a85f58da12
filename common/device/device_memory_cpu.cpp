// CPU-only implementation of device_memory.h, for LibTorch builds without CUDA.
#include "common/base/errors.h"
#include "common/device/device_memory.h"

#include "common/device/tensor_accounting.h"

namespace up {

bool CudaBuilt() { return false; }
int CudaDeviceCount() { return 0; }

torch::Device ParseDevice(const std::string& value, const std::string& what) {
  if (value == "cpu" || value == "auto") return torch::Device(torch::kCPU);
  throw UsageError(what + " = " + value + ": this build of LibTorch has no CUDA support; use cpu");
}

void SynchronizeDevice(const torch::Device&) {}
void ReleaseCachedMemory(const torch::Device&) {}
int64_t PeakDeviceBytes(const torch::Device&) { return 0; }
void DeviceTensorStats(const torch::Device&, int64_t* live, int64_t* peak, int64_t* reserved_peak) {
  *live = *peak = *reserved_peak = 0;
}
void ResetDevicePeak(const torch::Device&) {}
void SetMemoryFraction(const torch::Device&, double) {}
void ApplyMemoryCapFromEnv(const torch::Device&) {}
void ApplyMemoryBudget(const torch::Device&, int64_t) {}
torch::Tensor EmptyHostLike(const torch::Tensor& like) {
  // Plain host memory outside the accounting: it stands for pinned memory,
  // which is not the device's either.
  return EmptyUncounted(like.sizes(), like.scalar_type());
}
bool RegisterHostMemory(void*, size_t) { return false; }
void UnregisterHostMemory(void*) {}

struct SideCopyStream::Impl {};
SideCopyStream::SideCopyStream(const torch::Device&) {}
SideCopyStream::~SideCopyStream() = default;
void SideCopyStream::Begin() {}
void SideCopyStream::End() {}
void SideCopyStream::Join() {}
void SideCopyStream::Synchronize() {}

}  // namespace up
