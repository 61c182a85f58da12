// What a way of training needs on a card besides the tensors it holds, and
// how much of the card `unet-pipeline plan` lets it use: the verdict behind
// each row of `plan`.
//
//   needed = tensor bytes        measured on the CPU's device (memory_probe.h),
//                                or the estimate from shapes (memory_plan.h)
//          + allocator reserve   kAllocatorReserveFraction of the tensor bytes
//          + cuDNN workspace     kWorkspaceAllowanceBytes per process
//          + CUDA context        kContextAllowanceBytes per process
//   usable = card - headroom     (--gpu-mem, --headroom: default 10%)
//   fits   = needed <= usable
//
// The three allowances are stated defaults, not measurements: no GPU has run
// this project yet. scripts/gpu-check.sh records, per way, the caching
// allocator's reserved bytes against its allocated bytes against this
// prediction, so the first card that runs it can replace them with measured
// figures. Pure arithmetic, torch-free.
#pragma once

#include <cstdint>
#include <string>

namespace up {

// Per process: the CUDA context with the kernels of LibTorch, cuDNN and
// cuBLAS loaded (a few hundred MiB with CUDA's lazy loading) and the driver's
// own allocations on the card.
inline constexpr int64_t kContextAllowanceBytes = 1LL << 30;

// What PyTorch's CUDA caching allocator reserves beyond the live tensors at
// their peak, as a fraction of them. Its rules: every request rounds up to
// 512 bytes; requests up to 1 MiB share 2 MiB segments; requests from 1 to
// 10 MiB are cut from 20 MiB segments; larger ones get a segment of their own,
// rounded up to 2 MiB. For a U-Net's activations (tens to hundreds of MiB
// each) the rounding is under 2%, and the small pool's partly used 2 MiB
// segments are a few MiB in all. What costs is splitting: a freed large block
// is cut for the next smaller request and its remainder stays reserved, unused
// by anything larger, while the segment holds a live tensor (on a failed
// cudaMalloc the allocator frees its wholly unused segments and retries, so
// only such partly used segments count at the peak). Reserved over allocated
// in CNN training is commonly 1.05x to 1.3x; 15% covers the rounding and a
// typical split remainder. Every process of a run sets expandable segments
// (common/device/cuda_allocator_config.h), which leave no split remainders:
// the 15% stays, a margin, until the GPU check measures it.
inline constexpr double kAllocatorReserveFraction = 0.15;

// Per process: the scratch cuDNN's convolution algorithms and cuBLAS take
// beside the tensors. cuBLAS keeps a few MiB to tens of MiB per handle;
// cuDNN's implicit-GEMM algorithms, which its heuristics pick for 3-D
// convolutions, want up to a few hundred MiB. PyTorch chooses among the
// algorithms whose workspace it can allocate, so less room means a slower
// algorithm, not an out-of-memory error: 256 MiB keeps a fast one in reach.
// A default until the GPU check measures it.
inline constexpr int64_t kWorkspaceAllowanceBytes = 256LL << 20;

// --headroom's default: kept free of everything above, for what none of it
// counts (the driver's own growth, other processes on the card, a display)
// and for the prediction's own error (plan's measured rows are held within
// 10% of real runs by the PlanMeasured tests).
inline constexpr const char* kDefaultHeadroom = "10%";

// The card a plan is made for.
struct CardBudget {
  int64_t card_bytes = 0;      // --gpu-mem
  int64_t headroom_bytes = 0;  // --headroom, in bytes of this card
  std::string headroom_text;   // as given: "10%", "1.5GiB"
  int64_t usable_bytes() const { return card_bytes - headroom_bytes; }
};

// --gpu-mem ("16GiB") and --headroom: a percentage of the card from 0% to
// under 100% ("10%", "7.5%") or a size ("1.5GiB", "512MiB", "0"). UsageError
// naming the flag and its value when either is malformed, or when the
// headroom leaves nothing of the card.
CardBudget ParseCardBudget(const std::string& gpu_mem, const std::string& headroom);

// What a way needs on the card, in parts; `total()` is what must fit.
struct CardNeed {
  int64_t tensor_bytes = 0;
  int64_t reserve_bytes = 0;    // the caching allocator's, beyond the tensors
  int64_t workspace_bytes = 0;  // cuDNN's and cuBLAS's, every process
  int64_t context_bytes = 0;    // every process's CUDA context
  int64_t total() const { return tensor_bytes + reserve_bytes + workspace_bytes + context_bytes; }
};

// The allocator's reserve over `tensor_bytes` (rounded up).
int64_t AllocatorReserveBytes(int64_t tensor_bytes);

// What `processes` processes holding `tensor_bytes` together need.
CardNeed NeedOnCard(int64_t tensor_bytes, int processes);

// "13.2 GiB (10.4 GiB tensors + 1.6 GiB allocator reserve + 256 MiB
// workspace + 1.0 GiB context)"; with two processes "... + 2.0 GiB contexts
// of 2 processes)".
std::string NeedText(const CardNeed& need);

}  // namespace up
