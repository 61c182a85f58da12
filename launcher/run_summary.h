// What a training run records, for both trainers: each step's line in
// metrics.jsonl, the figures returned to the caller and the one writer of
// the run folder's summary.json.
//
// metrics.jsonl: a line a step, as common/run/metrics_format.h writes it.
//
// summary.json (one line; keys in this order):
//   {"mode": "pipeline" | "single-process", <the mode's own fields>,
//    "steps", "final_loss", "wall_s", "samples_per_s",
//    "peak_rss_bytes": {process: bytes}, "peak_device_bytes": {process: bytes},
//    "peak_tensor_bytes": {process: bytes}, ["peak_reserved_bytes": {process: bytes}],
//    ["busy_fraction": {process: fraction of wall_s}],
//    [with validation: "val_dice" (the last), "best_val_dice", "best_val_step"],
//    "param_digest"}
// peak_tensor_bytes is measured (tensor_accounting.h): the most tensor storage
// each trainer process held at once on its device; peak_reserved_bytes, on
// CUDA only, what its caching allocator held.
// The pipeline's own fields are schedule, transport, nnodes and run_id; a
// process without a device peak (the launcher) is left out of
// peak_device_bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/base/json_writer.h"
#include "common/config/config.h"
#include "common/run/metrics_format.h"
#include "common/run/run_dir.h"
#include "common/run/val_metrics.h"

namespace up {

struct TrainSummary {
  int64_t steps = 0;  // the last completed step
  double final_loss = 0;
  double wall_s = 0;
  double samples_per_s = 0;
  std::string param_digest;
  // With validation: the last pass's mean Dice and the best so far.
  std::optional<double> val_dice;
  BestValidation best;

  // Sets steps and samples_per_s for a run that trained from step `first`
  // to `completed` at `batch_size` samples a step in wall_s.
  void SetThroughput(int64_t first, int64_t completed, int batch_size);
};

// fp16's part of a step's record, as metrics.jsonl holds it.
using Fp16Record = StepMetrics::Fp16;

// Counts fp16's skipped steps and warns once when more than a few in a row
// are skipped (the loss has most likely diverged), saying what to do.
class SkipWatch {
 public:
  static constexpr int kTooManyInARow = 5;
  Fp16Record Note(int64_t step, double loss_scale, bool skipped);

 private:
  int64_t total_ = 0;
  int in_a_row_ = 0;
  bool warned_ = false;
};

// A validation pass's figures for the step's line.
struct ValidationRecord {
  ValidationScores scores;
  const std::vector<ValidationEntry>* entries = nullptr;
  double seconds = 0;
};

// Appends step `step`'s line (step counts from 1 in the file) to metrics.jsonl.
void AppendStepMetrics(RunDir& run, const TrainConfig& t, int64_t step, double loss, double dice,
                       double step_s, double data_wait_s,
                       const std::optional<Fp16Record>& fp16 = std::nullopt,
                       const ValidationRecord* validation = nullptr);

// Scores a validation pass (per case counts, in plan order), logs its line,
// updates `summary`'s last and best; returns the record for the metrics and
// whether it is the best yet (checkpoints/best moves to this step).
ValidationRecord FinishValidation(const std::vector<std::vector<int64_t>>& case_counts,
                                  const std::vector<ValidationEntry>& entries, int64_t step,
                                  double seconds, TrainSummary* summary, bool* best);

// How step `step` (0-based) ends: with a checkpoint (the last step, every
// checkpoint.every steps, or a stop signal), and whether the run then stops
// (a stop signal arrived: finish this step, checkpoint it, leave the loop).
struct StepEnd {
  bool checkpoint = false;
  bool stopping = false;
  // With data.validation: every validate.every steps and after the last
  // (not when a stop cuts the run short).
  bool validate = false;
};
StepEnd DecideStepEnd(const Config& config, int64_t step);

// The warning a stopped run leaves: where it is checkpointed, how to go on.
void WarnStopped(int64_t completed, const RunDir& run);

// One process's figures for summary.json.
// A trainer's peak tensor bytes in its forward/backward work and in its
// optimizer steps, apart (`plan` extrapolates each on its own line).
struct PhasePeaks {
  int64_t compute = 0;
  int64_t step = 0;
};

struct ProcessFigures {
  std::string name;  // "trainer", "launcher", "encoder", "decoder"
  int64_t peak_rss_bytes = 0;
  std::optional<int64_t> peak_device_bytes;     // none: not on a device (the launcher)
  std::optional<double> busy_s;                 // time holding the device turn (stages)
  std::optional<int64_t> peak_tensor_bytes;     // tensor storage on its device (trainers)
  std::optional<int64_t> peak_reserved_bytes;   // CUDA: the caching allocator's peak reserve
  std::optional<int64_t> residue_tensor_bytes;  // stages: the most held between turns
  std::optional<PhasePeaks> phase_peaks;
};

// The most tensor bytes one device held at once, all its processes together
// (what `train.memory_budget` limits and `plan` predicts).
struct DevicePeak {
  std::string device;  // "cpu", "cuda:0"
  int64_t peak_tensor_bytes = 0;
};

// Writes summary.json: `mode`, then `mode_fields` (a JsonWriter's fields in
// order), then the common figures.
void WriteRunSummary(RunDir& run, const std::string& mode, const JsonWriter& mode_fields,
                     const TrainSummary& summary, const std::vector<ProcessFigures>& processes,
                     const std::vector<DevicePeak>& devices, int64_t memory_budget);

}  // namespace up
