// What a process's tensors take, measured rather than estimated: the live and
// peak bytes of tensor storage on one device.
//
// CPU: a counting allocator installed as LibTorch's CPU allocator at process
// start (InstallTensorAccounting) sees every CPU tensor the process creates.
// Each block carries its size in a 64-byte header in front of the data, so
// the DataPtr's context stays equal to its data pointer, as oneDNN requires,
// and freeing needs no table and no lock. Tensors that view memory they do
// not own (a ring slot a stage receives, from_blob) are not counted.
// CUDA: the caching allocator's own statistics (allocated and reserved).
// A device budget (device_budget.h, `train.memory_budget`) makes the CPU
// allocator charge every block to a total shared by the device's processes
// and refuse one that would pass it, with c10::OutOfMemoryError as CUDA does.
// Host buffers that stand for pinned memory (parked state) stay outside both.
// Installing it also keeps freed blocks in the process rather than handing
// them back to the kernel (glibc's mmap and trim thresholds), so a step does
// not fault its tensors in again. Thread-safe: the counters are atomics.
#pragma once

#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "common/device/device_budget.h"

namespace up {

struct TensorBytes {
  int64_t live = 0;      // allocated now
  int64_t peak = 0;      // the most allocated at once since start (or the last reset)
  int64_t reserved = 0;  // CUDA: the caching allocator's peak reserved bytes; CPU: = peak

  // Folds a later reading in: its live bytes, the larger peaks.
  void Merge(const TensorBytes& later) {
    live = later.live;
    peak = std::max(peak, later.peak);
    reserved = std::max(reserved, later.reserved);
  }
};

// Makes the counting allocator LibTorch's CPU allocator; idempotent. Call
// before the first tensor: a block allocated earlier is freed uncounted.
void InstallTensorAccounting();
bool TensorAccountingInstalled();

// This process's tensor bytes on `device`.
TensorBytes TensorBytesOn(const torch::Device& device);

// Starts a new peak at the bytes live now (for a peak per turn).
void ResetPeakTensorBytes(const torch::Device& device);

// Ends a phase of the work (forward/backward, an optimizer step): the
// readings since the last reset, and a new peak starting at what is live.
TensorBytes TakeTensorBytes(const torch::Device& device);

// From now on, CPU tensors are charged to `budget` (shared memory, or the
// single-process trainer's own); null stops charging new ones. The budget
// must outlive every tensor charged to it.
void UseDeviceBudget(DeviceBudget* budget);
DeviceBudget* CurrentDeviceBudget();

// The last allocation the budget refused in this process.
struct Refusal {
  int64_t requested = 0;
  int64_t in_use = 0;
  int64_t budget = 0;
};
std::optional<Refusal> LastRefusal();

// Tensor bytes this process holds that no allocator of its own made (a ring
// slot it reads in place), counted as their copy onto the device would be:
// Charge throws c10::OutOfMemoryError when the budget refuses them.
void ChargeUnowned(int64_t bytes);
void UnchargeUnowned(int64_t bytes);

// Whether `t`'s storage came from the counting allocator.
bool CountedByAccounting(const torch::Tensor& t);

// An uninitialised contiguous CPU tensor outside the accounting and any
// budget: the CPU's stand-in for pinned host memory (parking buffers).
torch::Tensor EmptyUncounted(at::IntArrayRef sizes, at::ScalarType dtype);
// `t` (a CPU tensor) copied into a new buffer of EmptyUncounted: a tensor
// leaving the device's count for host memory.
torch::Tensor UncountedCopy(const torch::Tensor& t);

// Where the process is, for an out-of-memory line ("step 3, turn [F0 F1],
// micro-batch 1"); set by the trainers as they go.
void SetMemoryPlace(std::string place);
std::string MemoryPlace();

}  // namespace up
