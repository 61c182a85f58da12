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
// Installing it also keeps freed blocks in the process rather than handing
// them back to the kernel (glibc's mmap and trim thresholds), so a step does
// not fault its tensors in again. Thread-safe: the counters are atomics.
#pragma once

#include <torch/torch.h>

#include <algorithm>
#include <cstdint>

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

}  // namespace up
