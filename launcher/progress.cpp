// See progress.h.
#include "launcher/progress.h"

#include <cstdio>

#include "common/logging.h"

namespace up {

Progress::Progress(std::string mode, int64_t total_steps)
    : mode_(std::move(mode)),
      total_(total_steps),
      start_(std::chrono::steady_clock::now()),
      last_print_(start_) {}

void Progress::Step(int64_t step, double loss, double dice, double samples_per_s,
                    const std::string& extra) {
  const auto now = std::chrono::steady_clock::now();
  if (first_step_ < 0) first_step_ = step - 1;
  const bool due = total_ <= 50 || step == total_ || now - last_print_ >= std::chrono::seconds(2);
  if (!due) return;
  last_print_ = now;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double per_step = elapsed / std::max<int64_t>(1, step - first_step_);
  char line[256];
  std::snprintf(line, sizeof(line),
                "step %lld/%lld  loss %.4f  dice %.3f  %.1f samples/s  eta %.0fs",
                static_cast<long long>(step), static_cast<long long>(total_), loss, dice,
                samples_per_s, per_step * (total_ - step));
  LogInfo(std::string(line) + (extra.empty() ? "" : "  " + extra));
}

}  // namespace up
