// cuda_ipc_channel.h for LibTorch builds without CUDA: one clear error.
#include "common/base/errors.h"
#include "ipc/cuda_ipc_channel.h"

namespace up::ipc {

size_t CudaIpcHandleSegmentBytes() { return 4096; }

std::unique_ptr<TensorSender> MakeCudaIpcSender(ShmRing&, int) {
  throw UsageError(
      "pipeline.transport = cuda_ipc: this build of LibTorch has no CUDA support; use shm");
}

std::unique_ptr<TensorReceiver> MakeCudaIpcReceiver(ShmRing&, int) {
  throw UsageError(
      "pipeline.transport = cuda_ipc: this build of LibTorch has no CUDA support; use shm");
}

}  // namespace up::ipc
