// See device_lock.h.
#include "launcher/device_lock.h"

#include "common/errors.h"

namespace up {

bool ResolveLock(const std::string& lock, const std::string& enc, const std::string& dec,
                 const std::string& schedule) {
  const bool shared =
      enc == dec || (enc == "cuda" && dec == "cuda:0") || (enc == "cuda:0" && dec == "cuda");
  const bool on = lock == "on" || (lock == "auto" && shared);
  if (on && schedule != "sequential") {
    throw UsageError("pipeline.schedule = " + schedule +
                     ": overlapped schedules need stages that do not take turns; " +
                     (lock == "on"
                          ? "set pipeline.lock: off"
                          : "put the stages on different devices or set pipeline.lock: off") +
                     ", or use pipeline.schedule: sequential");
  }
  return on;
}

bool DeviceLocks::TryAcquire(const std::string& device, StageId stage) {
  if (!enabled_) return true;
  auto it = holders_.find(device);
  if (it != holders_.end()) return it->second == stage;
  holders_.emplace(device, stage);
  return true;
}

void DeviceLocks::Release(const std::string& device, StageId stage) {
  if (!enabled_) return;
  auto it = holders_.find(device);
  if (it == holders_.end() || it->second != stage) {
    throw RuntimeError(std::string("device lock: ") + StageName(stage) + " released " + device +
                       " without holding it");
  }
  holders_.erase(it);
}

std::optional<StageId> DeviceLocks::Holder(const std::string& device) const {
  auto it = holders_.find(device);
  if (it == holders_.end()) return std::nullopt;
  return it->second;
}

}  // namespace up
