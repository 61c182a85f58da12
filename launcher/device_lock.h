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
#include <vector>

#include "common/config/config.h"

namespace up {

// Whether stages take turns: pipeline.lock auto = on when two stages use the
// same device (CPU included; `devices` are the stages' lock keys, "cuda" the
// same as "cuda:0"). Throws UsageError when an overlapped schedule is asked
// for on a shared lock.
bool ResolveLock(Lock lock, const std::vector<std::string>& devices, Schedule schedule);
// The two-stage case.
inline bool ResolveLock(Lock lock, const std::string& encoder_device,
                        const std::string& decoder_device, Schedule schedule) {
  return ResolveLock(lock, {encoder_device, decoder_device}, schedule);
}

class DeviceLocks {
 public:
  explicit DeviceLocks(bool enabled) : enabled_(enabled) {}

  // False when another stage holds `device` (the caller must not send the
  // turn). Stages by their index in the pipeline.
  bool TryAcquire(const std::string& device, int stage);
  // Throws RuntimeError when `stage` does not hold `device`.
  void Release(const std::string& device, int stage);
  std::optional<int> Holder(const std::string& device) const;
  bool enabled() const { return enabled_; }

 private:
  bool enabled_;
  std::map<std::string, int> holders_;
};

}  // namespace up
