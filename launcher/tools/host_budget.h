// What a way of training holds in host memory (RAM), every process of it
// together at its peak, and the machine it must fit: the host half of each
// row of `unet-pipeline plan`, and `train`'s preflight.
//
//   host = runtime          kHostRuntimeAllowanceBytes per process (LibTorch's
//                           code and heaps, the data loader): the launcher and
//                           each stage, or the one trainer
//        + state            weights, gradients, optimizer state of every stage:
//                           parked in host memory between turns, or on a CPU
//                           device anyway
//        + device tensors   where the device is the host (a CPU run): the
//                           device's peak tensor bytes (memory_plan.h's
//                           estimate; the pipeline's stages take turns on it)
//        + offloaded        what offload keeps in host memory until the unit's
//                           backward: each unit's input, every micro-batch in
//                           flight
//        + ring             the shared-memory ring's slots (pipeline.transport
//                           shm): forward and backward, one slot per
//                           micro-batch, per channel
//
// The estimate is what the machine holds at once. What `plan` measures is
// the sum of the processes' peak resident sizes (summary.json's
// peak_rss_bytes, the figure the acceptance holds plan to): a shared page
// counts in the resident size of every process that touched it, so both ends
// of a ring count its slots, and each process's peak counts though they fall
// at different times (a stage's freed activations, kept by its allocator,
// count while the other computes). The measured sum is therefore an upper
// bound of what the machine holds, by about one ring and the stages' turns
// overlapping: on the safe side for a verdict; the estimate, which `train`'s
// preflight refuses runs by, is not, so as not to refuse runs that fit.
//
// An estimate from shapes, on the safe side; `plan` measures instead (the
// probes' peak_rss_bytes, extrapolated), unless --no-measure. Pure arithmetic
// except ReadMachineMemory; torch-free.
#pragma once

#include <cstdint>
#include <string>

#include "common/config/config.h"

namespace up {

// Per process: what a tiny run's process holds at its peak besides its
// tensors (summary.json's peak_rss_bytes for configs/tiny.yaml: the
// launcher 370 to 410 MB, each stage 510 to 600 MB with a TorchScript
// model, the single-process trainer 420 MB): LibTorch's and oneDNN's code
// and heaps, the data loader's buffers, the process's own bookkeeping.
inline constexpr int64_t kHostRuntimeAllowanceBytes = 576LL << 20;

// A way's host bytes, in parts; total() is what must fit the machine.
struct HostNeed {
  int processes = 1;
  int64_t runtime_bytes = 0;
  int64_t state_bytes = 0;
  int64_t device_bytes = 0;  // tensors of a device that is the host; 0 on a GPU
  int64_t offload_bytes = 0;
  int64_t ring_bytes = 0;  // once, though both its processes map it
  int64_t total() const {
    return runtime_bytes + state_bytes + device_bytes + offload_bytes + ring_bytes;
  }
};

// Whether `config`'s stages (or the single-process trainer) run on the CPU,
// once `auto` is resolved (ResolveAutoDevicesHere): then the device's
// tensors are in host memory too.
bool TrainsOnHost(const Config& config);

// The estimate for training `config` as it says (single-process or the
// pipeline with its parts, replicas, activation policy, offload, transport),
// with `device_is_host` as TrainsOnHost says for the machine it runs on.
HostNeed EstimateHostNeed(const Config& config, bool single_process, bool device_is_host);

// "19.3 GiB (1.7 GiB runtime of 3 processes + 345 MiB state + 7.2 GiB
// device tensors + 5.9 GiB offloaded + 4.1 GiB ring)", parts that are 0 left out.
std::string HostNeedText(const HostNeed& need);

// The machine's memory, from /proc/meminfo (0 where it cannot be read).
struct MachineMemory {
  int64_t total_bytes = 0;      // MemTotal
  int64_t available_bytes = 0;  // MemAvailable
};
MachineMemory ReadMachineMemory();

// `plan --host-mem`: "" is the machine's MemTotal; else a size ("12.7GiB").
// UsageError (one line, exit 2) for a malformed or non-positive value.
int64_t ParseHostMem(const std::string& text);

// train's preflight: UsageError when `need` exceeds the machine's MemTotal
// (the run would be killed by the kernel's out-of-memory killer); a returned
// warning line ("" when none) when it exceeds MemAvailable only.
std::string CheckHostFits(const HostNeed& need, const MachineMemory& machine);

}  // namespace up
