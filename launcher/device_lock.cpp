// See device_lock.h.
#include "launcher/device_lock.h"

#include <set>

#include "common/base/errors.h"

namespace up {

bool ResolveLock(Lock lock, const std::vector<std::string>& devices, Schedule schedule) {
  std::set<std::string> seen;
  bool shared = false;
  for (const std::string& d : devices) {
    const std::string key = d == "cuda" ? "cuda:0" : d;
    if (!seen.insert(key).second) shared = true;
  }
  const bool on = lock == Lock::kOn || (lock == Lock::kAuto && shared);
  if (on && schedule != Schedule::kSequential) {
    throw UsageError("pipeline.schedule = " + NameOf(schedule) +
                     ": overlapped schedules need stages that do not take turns; " +
                     (lock == Lock::kOn
                          ? "set pipeline.lock: off"
                          : "put the stages on different devices or set pipeline.lock: off") +
                     ", or use pipeline.schedule: sequential");
  }
  return on;
}

bool DeviceLocks::TryAcquire(const std::string& device, int stage) {
  if (!enabled_) return true;
  auto it = holders_.find(device);
  if (it != holders_.end()) return it->second == stage;
  holders_.emplace(device, stage);
  return true;
}

void DeviceLocks::Release(const std::string& device, int stage) {
  if (!enabled_) return;
  auto it = holders_.find(device);
  if (it == holders_.end() || it->second != stage) {
    throw RuntimeError("device lock: stage " + std::to_string(stage) + " released " + device +
                       " without holding it");
  }
  holders_.erase(it);
}

std::optional<int> DeviceLocks::Holder(const std::string& device) const {
  auto it = holders_.find(device);
  if (it == holders_.end()) return std::nullopt;
  return it->second;
}

}  // namespace up
