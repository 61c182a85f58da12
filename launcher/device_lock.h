// The launcher's device locks: one per device, held by at most one stage at a
// time. A stage computes only while it holds its device's turn (the launcher
// sends it a Turn only then). With the lock off, or stages on different
// devices, turns do not wait for each other.
//
// Not thread-safe: the launcher's single control loop owns it.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "launcher/schedule.h"

namespace up {

// Whether stages take turns: pipeline.lock auto = on when both stages use the
// same device (CPU included). Throws UsageError when an overlapped schedule
// is asked for on a shared lock.
bool ResolveLock(const std::string& lock, const std::string& encoder_device,
                 const std::string& decoder_device, const std::string& schedule);

class DeviceLocks {
 public:
  explicit DeviceLocks(bool enabled) : enabled_(enabled) {}

  // False when another stage holds `device` (the caller must not send the turn).
  bool TryAcquire(const std::string& device, StageId stage);
  // Throws RuntimeError when `stage` does not hold `device`.
  void Release(const std::string& device, StageId stage);
  std::optional<StageId> Holder(const std::string& device) const;
  bool enabled() const { return enabled_; }

 private:
  bool enabled_;
  std::map<std::string, StageId> holders_;
};

}  // namespace up
