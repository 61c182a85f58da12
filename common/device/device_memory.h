// Device memory, behind one interface with a CUDA and a CPU implementation
// (device_memory_cuda.cpp is built when LibTorch has CUDA; otherwise
// device_memory_cpu.cpp). Everything else calls these and builds without a GPU.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>

#include "common/config/config_file.h"
#include "common/layout/pipeline_layout.h"

namespace up {

// Parses "cpu", "cuda", "cuda:N" and "auto" (cuda:0 when there is a GPU, else
// the CPU; the launcher resolves auto before it starts anything, see
// ResolveAutoDevicesHere). A CUDA device on a machine without one is a
// UsageError naming the key (`what`) and the value.
torch::Device ParseDevice(const std::string& value, const std::string& what);

// Whether this build has CUDA support and how many devices are visible.
bool CudaBuilt();
int CudaDeviceCount();

// ResolveAutoDevices (config_file.h) with this machine's count.
inline AutoDevices ResolveAutoDevicesHere(Config* config) {
  return ResolveAutoDevices(config, CudaDeviceCount(), CudaBuilt());
}

// ParseDevice for every stage that runs on node `node`, in every replica: a
// device this machine lacks is the UsageError, before anything (a run
// folder) is made.
// `nnodes`: the machines of the run (replicas place themselves over them:
// ReplicaSlot).
inline void CheckStageDevices(const Config& config, int node = 0, int nnodes = 1) {
  const int R = config.pipeline.replicas;
  if (R > 1 && nnodes > 1 && ReplicaNodes(R, nnodes) == 0) return;  // the placement says why
  const int span = R > 1 && nnodes > 1 ? ReplicaNodes(R, nnodes) : nnodes;
  for (int r = 0; r < R; ++r) {
    if (R > 1 && nnodes > 1 && ReplicaFirstNode(R, nnodes, r) != node - node % span) continue;
    for (const StageSpec& s : ResolveLayout(config, R > 1 ? ReplicaSlot(R, nnodes, r) : 0).stages) {
      if (s.node == node % span)
        ParseDevice(s.device, r == 0 ? s.device_key
                                     : s.device_key + " (pipeline.replicas: replica " +
                                           std::to_string(r) + "'s copy)");
    }
  }
}

// Waits on the host until the work queued on `device` has run (timing a
// CUDA device); no-op on CPU, whose work runs inline.
void SynchronizeDevice(const torch::Device& device);

// Returns the caching allocator's unused blocks on `device` to the driver,
// so another process sharing the GPU can use them. No-op on CPU.
void ReleaseCachedMemory(const torch::Device& device);

// Peak bytes allocated on `device` since start (0 on CPU).
int64_t PeakDeviceBytes(const torch::Device& device);

// The caching allocator's statistics on a CUDA `device`: bytes allocated now,
// their peak, and the peak reserved (all 0 on CPU: see tensor_accounting.h).
void DeviceTensorStats(const torch::Device& device, int64_t* live, int64_t* peak,
                       int64_t* reserved_peak);
// Starts the allocated and reserved peaks anew (no-op on CPU).
void ResetDevicePeak(const torch::Device& device);

// Caps this process's share of `device` (fraction of its total memory), as
// the 16 GiB checks need. No-op on CPU.
void SetMemoryFraction(const torch::Device& device, double fraction);

// `train.memory_budget` on a CUDA device: caps this process's caching
// allocator at `bytes` of the card. Stages that share the card take turns,
// so each may use it all in its turn; the launcher checks after every turn
// that the turn's peak and the other stages' residue together stayed within
// it. No-op for 0 bytes and on CPU (there the counting allocator enforces
// the budget across processes: tensor_accounting.h).
void ApplyMemoryBudget(const torch::Device& device, int64_t bytes);

// Applies $UP_DEVICE_MEMORY_CAP_GIB (when set) as this process's cap on
// `device`: how the GPU check proves a model trains within a 16 GiB card.
void ApplyMemoryCapFromEnv(const torch::Device& device);

// Host buffers: pinned (page-locked) when CUDA is usable, plain otherwise.
torch::Tensor EmptyHostLike(const torch::Tensor& like);

// Registers `bytes` at `address` (a shared-memory segment) as pinned memory
// for fast copies, once per process; returns false when there is no GPU.
bool RegisterHostMemory(void* address, size_t bytes);
void UnregisterHostMemory(void* address);

// A side stream for moving a stage's training state (parking) on `device`:
// copies issued inside Run() go on it, after everything already queued on the
// device's current stream; Join() makes later work on the current stream wait
// for them (no host wait); Synchronize() waits on the host. On a CPU device
// (or a build without CUDA) copies run inline and the rest does nothing.
class SideCopyStream {
 public:
  explicit SideCopyStream(const torch::Device& device);
  ~SideCopyStream();
  SideCopyStream(const SideCopyStream&) = delete;
  SideCopyStream& operator=(const SideCopyStream&) = delete;

  template <typename Copies>
  void Run(const Copies& copies) {
    Begin();
    copies();
    End();
  }
  void Join();
  void Synchronize();

 private:
  void Begin();  // side stream current, ordered after the current stream
  void End();    // current stream restored, completion recorded
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace up
