// Progress reporting for the trainers (launcher process).
//
// On a terminal: one live line redrawn in place (at most ~8 times a second)
// with step/total, loss, Dice, samples/s, ETA and what the trainer adds (the
// pipeline: each stage's share of the device turns and its memory); log
// lines printed meanwhile appear above it, and it stays on screen at the end.
// Not on a terminal (a file, CI): a plain log line every few seconds, plus
// the first and the last step; with -v every step. With -q nothing. The log
// files get the plain lines in both cases. Single-threaded use.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace up {

struct ProgressFields {
  int64_t step = 0;   // steps done, 1-based
  int64_t total = 0;  // steps the run will do
  double loss = 0;
  double dice = 0;
  double samples_per_s = 0;
  double eta_s = -1;     // < 0: unknown
  std::string extra;     // appended after " | " when not empty
  double val_dice = -1;  // the last validation's mean Dice; < 0 (or NaN): none yet
};

// "step 12/20  loss 0.4123  dice 0.712  val 0.655  85.3 samples/s  eta 1m05s | extra"
// ("val" once a validation has run).
std::string FormatProgress(const ProgressFields& f);
// "5s", "1m05s", "2h03m"; "?" when negative or not finite.
std::string FormatDuration(double seconds);
// Whether a plain line is due: the first step, the last, or `interval_s`
// since the previous line.
bool PlainLineDue(int64_t step, int64_t first_step, int64_t total, double since_last_s,
                  double interval_s);

class Progress {
 public:
  Progress(std::string mode, int64_t total_steps);
  ~Progress();  // leaves a live line on screen as an ordinary line
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // `extra` is appended (the pipeline: device turns and memory per stage).
  void Step(int64_t step, double loss, double dice, double samples_per_s,
            const std::string& extra = "");
  // The line shows `val_dice` from now on.
  void Validated(double val_dice) { val_dice_ = val_dice; }

 private:
  using Clock = std::chrono::steady_clock;
  std::string mode_;
  int64_t total_;
  bool live_;        // a terminal line redrawn in place
  bool every_step_;  // -v without a terminal
  Clock::time_point start_;
  Clock::time_point last_line_;  // the last plain line (terminal: to the files)
  Clock::time_point last_draw_;  // the last redraw of the live line
  int64_t first_step_ = -1;
  double val_dice_ = -1;
};

}  // namespace up
