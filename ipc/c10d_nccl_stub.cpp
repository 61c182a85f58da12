// A build without NCCL (LibTorch without CUDA, or no nccl.h): asking for the
// nccl transport is one clear error.
#include "common/base/errors.h"
#include "ipc/c10d_channel.h"

namespace up::ipc {

c10::intrusive_ptr<c10d::Backend> MakeNcclGroup(c10::intrusive_ptr<c10d::Store>, int, int, double) {
  throw UsageError(
      "pipeline.transport = nccl: this build has no NCCL (LibTorch without CUDA, or nccl.h not "
      "found at build time); use gloo");
}

}  // namespace up::ipc
