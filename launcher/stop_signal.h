// Graceful stop for long runs. While a StopSignals object lives, the first
// SIGINT or SIGTERM asks the trainer to finish the current step, write a
// checkpoint and exit with 128 + signal (130, 143); a second one stops at
// once: the handler kills the registered stage processes (async-signal-safe),
// the launcher's waits see them die and its usual cleanup runs.
//
// Process-wide state, by nature of signals; one StopSignals at a time.
#pragma once

#include <sys/types.h>

namespace up {

class StopSignals {
 public:
  StopSignals();   // installs the handlers
  ~StopSignals();  // restores the previous ones
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The first signal received (0 when none).
  static int requested();
  // Processes the second signal kills (up to 8).
  static void WatchChild(pid_t pid);
};

}  // namespace up
