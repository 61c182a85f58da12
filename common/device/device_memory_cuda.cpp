// CUDA implementation of device_memory.h (built when LibTorch has CUDA). Every
// call checks at run time that a GPU is there, so the same binary runs on
// CPU-only machines.
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include "common/base/errors.h"
#include "common/device/device_memory.h"

#include "common/device/tensor_accounting.h"

#include <algorithm>
#include <cstdlib>
#include <optional>

namespace up {

bool CudaBuilt() { return true; }
int CudaDeviceCount() { return static_cast<int>(torch::cuda::device_count()); }

torch::Device ParseDevice(const std::string& value, const std::string& what) {
  torch::Device device(torch::kCPU);
  if (value == "auto") return CudaDeviceCount() > 0 ? torch::Device("cuda:0") : device;
  try {
    device = torch::Device(value == "cuda" ? "cuda:0" : value);
  } catch (const c10::Error&) {
    throw UsageError(what + " = " + value + ": expected cpu, cuda or cuda:N");
  }
  if (device.is_cuda() && device.index() >= CudaDeviceCount()) {
    throw UsageError(what + " = " + value + ": this machine has " +
                     std::to_string(CudaDeviceCount()) +
                     " CUDA device(s); use cpu or a device that exists");
  }
  return device;
}

void SynchronizeDevice(const torch::Device& device) {
  if (!device.is_cuda()) return;
  c10::cuda::CUDAGuard guard(device);
  c10::cuda::device_synchronize();
}

void ReleaseCachedMemory(const torch::Device& device) {
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::emptyCache();
}

int64_t PeakDeviceBytes(const torch::Device& device) {
  if (!device.is_cuda()) return 0;
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
  return stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)]
      .peak;
}

void DeviceTensorStats(const torch::Device& device, int64_t* live, int64_t* peak,
                       int64_t* reserved_peak) {
  *live = *peak = *reserved_peak = 0;
  if (!device.is_cuda()) return;
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
  const auto all = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
  *live = stats.allocated_bytes[all].current;
  *peak = stats.allocated_bytes[all].peak;
  *reserved_peak = stats.reserved_bytes[all].peak;
}

void ResetDevicePeak(const torch::Device& device) {
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
}

void SetMemoryFraction(const torch::Device& device, double fraction) {
  if (device.is_cuda())
    c10::cuda::CUDACachingAllocator::setMemoryFraction(fraction, device.index());
}

void ApplyMemoryCapFromEnv(const torch::Device& device) {
  const char* cap = std::getenv("UP_DEVICE_MEMORY_CAP_GIB");
  if (!cap || !device.is_cuda()) return;
  size_t free_bytes = 0, total_bytes = 0;
  cudaSetDevice(device.index());
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess || total_bytes == 0) return;
  const double fraction = std::atof(cap) * (1ULL << 30) / static_cast<double>(total_bytes);
  if (fraction > 0 && fraction < 1) SetMemoryFraction(device, fraction);
}

void ApplyMemoryBudget(const torch::Device& device, int64_t bytes) {
  if (bytes <= 0 || !device.is_cuda()) return;
  size_t free_bytes = 0, total_bytes = 0;
  cudaSetDevice(device.index());
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess || total_bytes == 0) return;
  const double fraction = static_cast<double>(bytes) / static_cast<double>(total_bytes);
  if (fraction < 1) SetMemoryFraction(device, fraction);
}

torch::Tensor EmptyHostLike(const torch::Tensor& like) {
  // Without a GPU, plain host memory outside the accounting: it stands for
  // pinned memory, which is not the device's either.
  if (CudaDeviceCount() == 0) return EmptyUncounted(like.sizes(), like.scalar_type());
  return torch::empty(
      like.sizes(),
      torch::TensorOptions().dtype(like.dtype()).device(torch::kCPU).pinned_memory(true));
}

bool RegisterHostMemory(void* address, size_t bytes) {
  if (CudaDeviceCount() == 0 || bytes == 0) return false;
  const cudaError_t rc = cudaHostRegister(address, bytes, cudaHostRegisterPortable);
  if (rc != cudaSuccess) {
    throw RuntimeError(std::string("cudaHostRegister of ") + std::to_string(bytes) +
                       " bytes failed: " + cudaGetErrorString(rc));
  }
  return true;
}

void UnregisterHostMemory(void* address) {
  if (CudaDeviceCount() > 0) cudaHostUnregister(address);
}

// On a CUDA device: a stream from the pool, an event that orders it after
// the current stream, and one that marks the copies done.
struct SideCopyStream::Impl {
  explicit Impl(c10::DeviceIndex index)
      : index(index), side(c10::cuda::getStreamFromPool(false, index)) {}
  c10::DeviceIndex index;
  c10::cuda::CUDAStream side;
  at::cuda::CUDAEvent queued, done;
  std::optional<c10::cuda::CUDAStreamGuard> guard;
};

SideCopyStream::SideCopyStream(const torch::Device& device) {
  if (device.is_cuda()) impl_ = std::make_unique<Impl>(device.has_index() ? device.index() : 0);
}
SideCopyStream::~SideCopyStream() = default;

void SideCopyStream::Begin() {
  if (!impl_) return;
  impl_->queued.record(c10::cuda::getCurrentCUDAStream(impl_->index));
  impl_->queued.block(impl_->side);
  impl_->guard.emplace(impl_->side);
}

void SideCopyStream::End() {
  if (!impl_) return;
  impl_->guard.reset();
  impl_->done.record(impl_->side);
}

void SideCopyStream::Join() {
  if (impl_) impl_->done.block(c10::cuda::getCurrentCUDAStream(impl_->index));
}

void SideCopyStream::Synchronize() {
  if (impl_) impl_->done.synchronize();
}

}  // namespace up
