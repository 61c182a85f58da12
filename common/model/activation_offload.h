// Activation offload: what checkpointing keeps of a unit (its inputs, see
// level_checkpoint.h) parked in host memory between the unit's forward and
// its backward, and fetched back just before that backward, the next one's
// copy running while the current one computes. `train.offload` (one process)
// and `pipeline.offload` (a stage's B and FB) turn it on; a trainer owns one
// ActivationOffload per device and clears it after each backward.
//
//   Park(inputs)  forward of unit k: each input copied into a host buffer
//                 (pinned on a GPU, from a pool reused step to step) on the
//                 side copy stream; the device tensors are held only until
//                 that copy is done (the next Park or Fetch waits for it), so
//                 the caching allocator cannot hand their blocks out early.
//   Fetch(k)      backward of unit k: its inputs back on the device (the
//                 compute stream waits on the copy's event, not the host);
//                 on a GPU it then starts the copy of unit k - 1, the one
//                 autograd runs next, so that copy overlaps unit k's compute.
//                 Unit k takes unit k - 1's output, so the same way without
//                 offload keeps unit k - 1's inputs (and every earlier
//                 unit's) on the device now: the prefetch never lifts the
//                 peak above that way's.
//   Clear()       after the backward: every buffer back to the pool.
//
// On a CPU device host and device are the same memory: the host buffers are
// outside the tensor accounting and the device budget (as parked state and
// ring slots are, tensor_accounting.h), the copies still run so their cost is
// visible, and nothing is prefetched (there is no copy to overlap, only a
// higher peak). Copies are exact: training equals the run without offload
// bit for bit. Not thread-safe: one trainer thread uses it.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "common/device/device_memory.h"

namespace up {

class ActivationOffload {
 public:
  explicit ActivationOffload(const torch::Device& device);
  ActivationOffload(const ActivationOffload&) = delete;
  ActivationOffload& operator=(const ActivationOffload&) = delete;

  // Copies `inputs` (on the device) to host buffers; returns the handle for
  // Fetch. Handles count from 0 in forward order until Clear.
  int Park(const std::vector<torch::Tensor>& inputs);
  // The inputs parked under `handle`, back on the device. REQUIRES: called
  // once per handle, after its Park.
  std::vector<torch::Tensor> Fetch(int handle);
  // Every host buffer back to the pool, every handle forgotten.
  void Clear();
  // The handle the next Park returns: [Next() before, Next() after) are
  // the handles of what was parked in between (one micro-batch's units).
  int Next() const { return static_cast<int>(entries_.size()); }
  // The host buffers of handles [first, end) back to the pool (their
  // micro-batch's backward is done); once every handle is released, Clear.
  void Release(int first, int end);

  // Bytes parked now (host buffers in use), and copied each way since the start.
  int64_t parked_bytes() const { return parked_bytes_; }
  int64_t copied_out_bytes() const { return copied_out_; }
  int64_t copied_in_bytes() const { return copied_in_; }

 private:
  struct Entry {
    std::vector<torch::Tensor> host;     // the parked copies
    std::vector<torch::Tensor> fetched;  // on the device once its copy is issued
    bool issued = false;
  };
  using PoolKey = std::pair<at::ScalarType, std::vector<int64_t>>;

  torch::Tensor Acquire(const torch::Tensor& like);
  void Issue(Entry& entry);  // the host-to-device copies of `entry`
  void WaitForCopiesOut();   // the device tensors of the last Park may go

  torch::Device device_;
  SideCopyStream stream_;
  std::vector<Entry> entries_;
  std::map<PoolKey, std::vector<torch::Tensor>> pool_;  // free host buffers
  std::vector<torch::Tensor> copying_out_;  // device tensors the side stream still reads
  int64_t parked_bytes_ = 0;
  int64_t copied_out_ = 0;
  int64_t copied_in_ = 0;
};

}  // namespace up
