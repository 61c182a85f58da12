// Deadlines: every wait in unet-pipeline ends at one (steady clock).
#pragma once

#include <chrono>

namespace up {

using Deadline = std::chrono::steady_clock::time_point;

// The moment `seconds` from now.
inline Deadline After(double seconds) {
  using Clock = std::chrono::steady_clock;
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

}  // namespace up
