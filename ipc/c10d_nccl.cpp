// NCCL for the c10d transport (see c10d_channel.h): built when LibTorch has
// CUDA and NCCL's header is found; c10d_nccl_stub.cpp otherwise.
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include "ipc/c10d_channel.h"

namespace up::ipc {

c10::intrusive_ptr<c10d::Backend> MakeNcclGroup(c10::intrusive_ptr<c10d::Store> store, int rank,
                                                int size, double timeout_s) {
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(std::move(store), rank, size, options);
}

}  // namespace up::ipc
