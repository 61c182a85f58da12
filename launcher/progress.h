// Progress reporting for the launcher: one line per step while steps are few,
// otherwise about every two seconds, with the ETA.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace up {

class Progress {
 public:
  Progress(std::string mode, int64_t total_steps);
  // `extra` is appended (e.g. which stage holds the device).
  void Step(int64_t step, double loss, double dice, double samples_per_s,
            const std::string& extra = "");

 private:
  std::string mode_;
  int64_t total_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_print_;
  int64_t first_step_ = -1;
};

}  // namespace up
