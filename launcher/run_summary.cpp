// See run_summary.h.
#include "launcher/run_summary.h"

#include "common/base/logging.h"
#include "common/run/metrics_format.h"
#include "common/training/loss_scale.h"
#include "common/training/stage_optimizer.h"
#include "launcher/progress.h"
#include "launcher/stop_signal.h"

namespace up {

void TrainSummary::SetThroughput(int64_t first, int64_t completed, int batch_size) {
  steps = completed;
  samples_per_s = wall_s > 0 ? (completed - first) * batch_size / wall_s : 0;
}

Fp16Record SkipWatch::Note(int64_t step, double loss_scale, bool skipped) {
  total_ += skipped ? 1 : 0;
  in_a_row_ = skipped ? in_a_row_ + 1 : 0;
  if (in_a_row_ > kTooManyInARow && !warned_) {
    warned_ = true;
    LogWarn(Str("fp16: steps ", step + 2 - in_a_row_, " to ", step + 1,
                " all had gradients that were not finite and were skipped (loss scale now ",
                loss_scale * LossScale::kBackoff,
                "): the loss has most likely diverged; lower train.lr, set train.grad_clip, or "
                "use train.precision bf16 (where the card has it) or fp32"));
  }
  return {loss_scale, skipped, total_};
}

void AppendStepMetrics(RunDir& run, const TrainConfig& t, int64_t step, double loss, double dice,
                       double step_s, double data_wait_s, const std::optional<Fp16Record>& fp16,
                       const ValidationRecord* validation) {
  StepMetrics m;
  m.step = step + 1;
  m.loss = loss;
  m.dice = dice;
  m.lr = ScheduledLr(t, step);
  m.step_s = step_s;
  m.samples_per_s = t.batch_size / step_s;
  m.data_wait_s = data_wait_s;
  m.fp16 = fp16;
  if (validation) {
    StepMetrics::Validation v{
        validation->scores.mean, {}, validation->scores.cases, validation->seconds};
    for (size_t e = 0; e < validation->entries->size(); ++e)
      v.entries.emplace_back((*validation->entries)[e].key, validation->scores.per_entry[e]);
    m.validation = v;
  }
  run.AppendMetrics(MetricsLine(m));
}

ValidationRecord FinishValidation(const std::vector<std::vector<int64_t>>& case_counts,
                                  const std::vector<ValidationEntry>& entries, int64_t step,
                                  double seconds, TrainSummary* summary, bool* best) {
  ValidationRecord r{ScoreValidation(case_counts, entries), &entries, seconds};
  *best = summary->best.Offer(r.scores, step + 1);
  summary->val_dice = r.scores.mean;
  std::string parts;
  for (size_t e = 0; e < entries.size(); ++e) {
    char value[32];
    std::snprintf(value, sizeof value, "%.3f", r.scores.per_entry[e]);
    parts += (parts.empty() ? "" : ", ") + entries[e].key + " " + value;
  }
  char mean[32];
  std::snprintf(mean, sizeof mean, "%.4f", r.scores.mean);
  LogInfo(Str("validation after step ", step + 1, ": val_dice ", mean, " (", parts, ") over ",
              r.scores.cases, r.scores.cases == 1 ? " case in " : " cases in ",
              FormatDuration(seconds), *best ? "; best so far, checkpoints/best" : ""));
  return r;
}

StepEnd DecideStepEnd(const Config& config, int64_t step) {
  StepEnd end;
  end.stopping = StopSignals::requested() != 0 && step + 1 < config.train.steps;
  const bool last = step + 1 == config.train.steps || end.stopping;
  end.checkpoint =
      last || (config.checkpoint.every > 0 && (step + 1) % config.checkpoint.every == 0);
  end.validate = config.data.HasValidation() && !end.stopping &&
                 (step + 1 == config.train.steps ||
                  (config.validate.every > 0 && (step + 1) % config.validate.every == 0));
  return end;
}

void WarnStopped(int64_t completed, const RunDir& run) {
  LogWarn(Str("stop requested: step ", completed, " is checkpointed; continue with --resume ",
              run.path()));
}

void WriteRunSummary(RunDir& run, const std::string& mode, const JsonWriter& mode_fields,
                     const TrainSummary& summary, const std::vector<ProcessFigures>& processes,
                     const std::vector<DevicePeak>& devices, int64_t memory_budget) {
  JsonWriter rss, device_peak, busy, tensors, reserved, residue, phases;
  bool any_busy = false, any_reserved = false, any_residue = false, any_phases = false;
  for (const ProcessFigures& p : processes) {
    rss.Field(p.name, p.peak_rss_bytes);
    if (p.peak_device_bytes) device_peak.Field(p.name, *p.peak_device_bytes);
    if (p.peak_tensor_bytes) tensors.Field(p.name, *p.peak_tensor_bytes);
    if (p.peak_reserved_bytes) {
      reserved.Field(p.name, *p.peak_reserved_bytes);
      any_reserved = true;
    }
    if (p.phase_peaks) {
      phases.Raw(p.name, JsonWriter()
                             .Field("compute", p.phase_peaks->compute)
                             .Field("step", p.phase_peaks->step)
                             .str());
      any_phases = true;
    }
    if (p.residue_tensor_bytes) {
      residue.Field(p.name, *p.residue_tensor_bytes);
      any_residue = true;
    }
    if (p.busy_s) {
      busy.Field(p.name, summary.wall_s > 0 ? *p.busy_s / summary.wall_s : 0.0);
      any_busy = true;
    }
  }
  JsonWriter out;
  out.Field("mode", mode)
      .Append(mode_fields)
      .Field("steps", summary.steps)
      .Field("final_loss", summary.final_loss)
      .Field("wall_s", summary.wall_s)
      .Field("samples_per_s", summary.samples_per_s)
      .Raw("peak_rss_bytes", rss.str())
      .Raw("peak_device_bytes", device_peak.str())
      .Raw("peak_tensor_bytes", tensors.str());
  if (any_phases) out.Raw("phase_peak_tensor_bytes", phases.str());
  if (any_residue) out.Raw("residue_tensor_bytes", residue.str());
  JsonWriter device_totals;
  for (const DevicePeak& d : devices) device_totals.Field(d.device, d.peak_tensor_bytes);
  out.Raw("peak_device_tensor_bytes", device_totals.str());
  if (memory_budget > 0) out.Field("memory_budget_bytes", memory_budget);
  if (any_reserved) out.Raw("peak_reserved_bytes", reserved.str());
  if (any_busy) out.Raw("busy_fraction", busy.str());
  if (summary.val_dice) {
    out.Field("val_dice", *summary.val_dice)
        .Field("best_val_dice", summary.best.dice)
        .Field("best_val_step", summary.best.step);
  }
  out.Field("param_digest", summary.param_digest);
  run.WriteSummary(out.str());
}

}  // namespace up
