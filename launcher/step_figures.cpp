// See step_figures.h.
#include "launcher/step_figures.h"

#include "common/base/errors.h"
#include "common/base/logging.h"

namespace up {

void StepTally::Add(int process, const ipc::TurnReport& report) {
  data_wait_s += report.data_wait_s;
  if (!report.dice_counts.empty()) dice.AddCounts(report.dice_counts);
  if (report.loss_scale > 0) stepped[static_cast<size_t>(process)] = report;
  loss += report.loss;
}

Fp16Record Fp16Verdict(const StepTally& tally, const std::vector<StageLink>& stages, int64_t step,
                       SkipWatch& skips) {
  const auto& last = tally.stepped.back();
  std::string outcomes;
  bool agree = true;
  for (size_t s = 0; s < tally.stepped.size(); ++s) {
    const auto& o = tally.stepped[s];
    outcomes += Str(
        s ? ", " : "", stages[s].key, " ",
        o ? Str("scale ", o->loss_scale, o->skipped ? " skipped" : "") : std::string("no step"));
    agree = agree && o && last && o->loss_scale == last->loss_scale && o->skipped == last->skipped;
  }
  if (!agree)
    throw RuntimeError(Str("fp16: the stages disagree on step ", step + 1, ": ", outcomes));
  return skips.Note(step, last->loss_scale, last->skipped);
}

std::string StageFiguresText(const std::vector<StageLink>& stages,
                             const std::vector<double>& held_s, double step_s, bool lock_on,
                             bool any_cuda) {
  std::string turns = lock_on ? "device turns:" : "busy:", rss = "  rss:", peak, tensors;
  for (const StageLink& s : stages) {
    const size_t i = static_cast<size_t>(s.index);
    turns += Str(" ", s.key, " ", static_cast<int>(100 * held_s[i] / step_s + 0.5), "%");
    rss += Str(" ", s.key, " ", static_cast<int64_t>(s.rss_bytes / 1048576.0 + 0.5), " MiB");
    peak += Str(" ", s.key, " ", s.device_peak_bytes >> 20, " MiB");
    tensors += Str(" ", s.key, " ", s.tensor_bytes >> 20, "/", s.peak_tensor_bytes >> 20, " MiB");
  }
  return turns + rss + (any_cuda ? "  device peak:" + peak : std::string()) +
         "  tensors:" + tensors + " (live/peak)";
}

}  // namespace up
