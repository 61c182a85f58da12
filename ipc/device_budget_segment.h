// A device's shared tensor-byte total (common/device/device_budget.h) in a named
// shared-memory segment: the launcher creates one for the CPU device its
// stages share, each stage maps it and charges its tensors to it. The creator
// removes the name when it goes (as every run-named segment, a dead
// launcher's is removed by the next one). Move-only; not thread-safe itself
// (the counter it maps is).
#pragma once

#include <cstdint>
#include <string>

#include "common/device/device_budget.h"
#include "ipc/shm_segment.h"

namespace up::ipc {

class DeviceBudgetSegment {
 public:
  // `budget_bytes` 0: no limit, only the device's total and peak are kept.
  static DeviceBudgetSegment Create(const std::string& name, int64_t budget_bytes);
  // Throws RuntimeError if `name` is missing or holds no budget.
  static DeviceBudgetSegment Open(const std::string& name);

  DeviceBudget* get() { return budget_; }
  const DeviceBudget* get() const { return budget_; }

 private:
  DeviceBudgetSegment(ShmSegment segment, DeviceBudget* budget)
      : segment_(std::move(segment)), budget_(budget) {}
  ShmSegment segment_;
  DeviceBudget* budget_;
};

}  // namespace up::ipc
