// See progress.h.
#include "launcher/progress.h"

#include <cmath>
#include <cstdio>

#include "common/base/logging.h"

namespace up {
namespace {

constexpr double kPlainIntervalS = 3.0;    // "every few seconds"
constexpr double kRedrawIntervalS = 0.12;  // the live line's refresh limit

}  // namespace

std::string FormatDuration(double s) {
  if (!(s >= 0) || !std::isfinite(s)) return "?";
  const long long total = std::llround(s);
  char buf[32];
  if (total < 60) {
    std::snprintf(buf, sizeof buf, "%llds", total);
  } else if (total < 3600) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", total / 60, total % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", total / 3600, total % 3600 / 60);
  }
  return buf;
}

std::string FormatProgress(const ProgressFields& f) {
  char val[32] = "";
  if (f.val_dice >= 0) std::snprintf(val, sizeof val, "  val %.3f", f.val_dice);
  char line[288];
  std::snprintf(line, sizeof line, "step %lld/%lld  loss %.4f  dice %.3f%s  %.1f samples/s  eta %s",
                static_cast<long long>(f.step), static_cast<long long>(f.total), f.loss, f.dice,
                val, f.samples_per_s, FormatDuration(f.eta_s).c_str());
  return std::string(line) + (f.extra.empty() ? "" : " | " + f.extra);
}

bool PlainLineDue(int64_t step, int64_t first_step, int64_t total, double since_last_s,
                  double interval_s) {
  return step == first_step || step >= total || since_last_s >= interval_s;
}

Progress::Progress(std::string mode, int64_t total_steps)
    : mode_(std::move(mode)),
      total_(total_steps),
      live_(StderrIsTerminal() && LogEnabled(LogLevel::kInfo)),
      every_step_(LogEnabled(LogLevel::kDebug)),
      start_(Clock::now()),
      last_line_(start_),
      last_draw_(start_) {}

Progress::~Progress() {
  if (live_) EndStatusLine();
}

void Progress::Step(int64_t step, double loss, double dice, double samples_per_s,
                    const std::string& extra) {
  const auto now = Clock::now();
  if (first_step_ < 0) first_step_ = step;
  // The ETA from the steps this process ran (a resumed run starts later).
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double per_step = elapsed / static_cast<double>(step - first_step_ + 1);
  const ProgressFields fields{step,  total_,        loss,
                              dice,  samples_per_s, per_step * static_cast<double>(total_ - step),
                              extra, val_dice_};
  const std::string line = FormatProgress(fields);
  const bool plain_due =
      every_step_ ||
      PlainLineDue(step, first_step_, total_,
                   std::chrono::duration<double>(now - last_line_).count(), kPlainIntervalS);
  if (live_) {
    if (step >= total_ ||
        std::chrono::duration<double>(now - last_draw_).count() >= kRedrawIntervalS) {
      ShowStatusLine(line);
      last_draw_ = now;
    }
    if (plain_due) {
      LogInfoToFiles(line);
      last_line_ = now;
    }
    if (step >= total_) EndStatusLine();
  } else if (plain_due) {
    LogInfo(line);
    last_line_ = now;
  }
}

}  // namespace up
