// See device_budget_segment.h.
#include "ipc/device_budget_segment.h"

#include <new>

#include "common/base/errors.h"

namespace up::ipc {

DeviceBudgetSegment DeviceBudgetSegment::Create(const std::string& name, int64_t budget_bytes) {
  ShmSegment segment = ShmSegment::Create(name, sizeof(DeviceBudget));
  auto* budget = new (segment.data()) DeviceBudget();
  budget->budget = budget_bytes;
  return DeviceBudgetSegment(std::move(segment), budget);
}

DeviceBudgetSegment DeviceBudgetSegment::Open(const std::string& name) {
  ShmSegment segment = ShmSegment::Open(name);
  if (segment.size() < sizeof(DeviceBudget) ||
      static_cast<const DeviceBudget*>(segment.data())->magic != DeviceBudget::kMagic) {
    throw RuntimeError("shared memory " + name + " holds no device budget");
  }
  auto* budget = static_cast<DeviceBudget*>(segment.data());
  return DeviceBudgetSegment(std::move(segment), budget);
}

}  // namespace up::ipc
