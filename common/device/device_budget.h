// The tensor bytes one device holds, shared by every process on it, against
// the run's `train.memory_budget`: how a CPU device emulates a card of that
// size. It lives in a shared-memory segment the launcher creates (or in the
// single-process trainer's own memory); each process's counting allocator
// (tensor_accounting.h) charges its tensors to it and refuses an allocation
// that would take the total past the budget, as a full card would.
// Torch-free and lock-free: two atomics that any process may update.
#pragma once

#include <atomic>
#include <cstdint>

namespace up {

struct DeviceBudget {
  static constexpr uint64_t kMagic = 0x7570627564676574ULL;  // "upbudget"
  uint64_t magic = kMagic;
  int64_t budget = 0;               // bytes; written once by the creator
  std::atomic<int64_t> used{0};     // bytes of tensors charged now, all processes
  std::atomic<int64_t> peak{0};     // the most charged at once
  std::atomic<int64_t> refused{0};  // allocations refused

  // Charges `bytes`; false (and nothing charged) when that would pass the budget.
  bool TryCharge(int64_t bytes, int64_t* in_use) {
    const int64_t after = used.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    if (budget > 0 && after > budget) {
      *in_use = used.fetch_sub(bytes, std::memory_order_relaxed) - bytes;
      refused.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    int64_t p = peak.load(std::memory_order_relaxed);
    while (after > p && !peak.compare_exchange_weak(p, after, std::memory_order_relaxed)) {
    }
    *in_use = after;
    return true;
  }
  void Uncharge(int64_t bytes) { used.fetch_sub(bytes, std::memory_order_relaxed); }
};
static_assert(std::atomic<int64_t>::is_always_lock_free, "the budget is shared across processes");

}  // namespace up
