// metrics.jsonl, the run folder's record of every optimizer step: one JSON
// object a line, appended and flushed as each step ends (RunDir). Both
// trainers write it through MetricsLine; the curves (WriteTrainingCurves),
// validation's best step (val_metrics.h) and the benchmarks read it back
// through ReadMetricsFile or the names below.
//
//   {"step", "loss", "dice", "lr", "step_s", "samples_per_s", "data_wait_s"
//    [, fp16: "loss_scale", "skipped", "skipped_steps"]
//    [, after a validation: "val_dice", "val_dice_<entry>" for each class
//       ("val_dice_1" ..) and BraTS region ("val_dice_wt", "_tc", "_et"),
//       "val_cases", "val_s"]}
// step counts from 1; step_s is the training step alone and data_wait_s
// the part of it spent waiting for micro-batches, every process's waits
// added; a non-finite value (a score no case has) is null.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/formats/plot_svg.h"

namespace up {

// The file's name inside a run folder, and the names of its fields that
// readers look up.
constexpr const char* kMetricsFile = "metrics.jsonl";
constexpr const char* kMetricStep = "step";
constexpr const char* kMetricLoss = "loss";
constexpr const char* kMetricDice = "dice";
constexpr const char* kMetricStepSeconds = "step_s";
constexpr const char* kMetricValDice = "val_dice";

struct StepMetrics {
  int64_t step = 0;  // from 1
  double loss = 0;
  double dice = 0;
  double lr = 0;
  double step_s = 0;
  double samples_per_s = 0;
  double data_wait_s = 0;
  struct Fp16 {
    double loss_scale = 0;      // the scale this step's loss used
    bool skipped = false;       // a gradient was not finite: no update
    int64_t skipped_steps = 0;  // skipped since this process started the run
  };
  std::optional<Fp16> fp16;
  struct Validation {
    double mean = 0;                                      // val_dice
    std::vector<std::pair<std::string, double>> entries;  // ("1", dice), ("wt", dice), ...
    int64_t cases = 0;
    double seconds = 0;
  };
  std::optional<Validation> validation;
};

// The step's line, without its newline.
std::string MetricsLine(const StepMetrics& m);

// Every line of a metrics.jsonl file that has a step, in file order. Lines
// that do not parse (a torn last line after a crash) are skipped. UsageError
// naming the file when it cannot be read.
std::vector<MetricsPoint> ReadMetricsFile(const std::string& path);

// Reads `run_dir`/metrics.jsonl and writes `run_dir`/curves.svg
// (plot_svg.h) atomically. Returns the path written.
std::string WriteTrainingCurves(const std::string& run_dir);

}  // namespace up
