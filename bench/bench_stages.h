// `unet-pipeline bench stages`: what more stages cost and save on one machine.
// For each stage count (2: one part per half, 3: two encoder parts, 4: two
// parts each), the three schedules with the lock off and one thread per
// stage, each from one traced training run (bench_trainer.h):
//   step_ms        the median step time after the warm-up
//   bubble         the stages' mean share of a step spent not computing
//                  (trace_breakdown.h StagesFromTrace: a stage's compute
//                  spans less the ring waits inside them), next to the
//                  theory for equal stages: (S-1)/(M+S-1) for gpipe and 1f1b,
//                  (S-1)/S for sequential, where one stage works at a time
//   slowest limit  the step the slowest stage allows (StagesRow)
//   first_peak     the first stage's peak tensor bytes: what it keeps for the
//                  micro-batches in flight (1f1b bounds them at S, gpipe keeps
//                  all M), and the schedule's in-flight count from the chain
// The figures are CPU figures: S stages overlap only as far as the machine
// has cores for them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace up::bench {

struct StagesOptions {
  std::string config;
  std::vector<int> stages{2, 3, 4};
  // Instead of `stages`, the parts of each half per run: {encoder, decoder}
  // ("1+2,2+2" on the command line), e.g. to cut the slower half.
  std::vector<std::pair<int, int>> layouts;
  int64_t steps = 6;
  int64_t warmup = 2;
  std::vector<std::string> sets;  // "key=value" overrides for every run
};

struct StagesRow {
  int stages = 0;
  int encoder_parts = 1, decoder_parts = 1;
  std::string schedule;
  double step_ms = 0;
  double speedup = 0;  // the sequential row's step_ms over this one's
  double bubble = 0;   // measured, mean over the stages
  double bubble_theory = 0;
  std::vector<std::pair<std::string, double>> stage_compute_ms;  // per step
  // What the slowest stage allows: its compute per step times (M+S-1)/M for
  // gpipe and 1f1b (the fill and drain at its pace), every stage's compute
  // summed for sequential. Equal stages make it the bubble-limited time;
  // unequal ones (a fixed split, or cuts by memory) raise it.
  double slowest_limit_ms = 0;
  int64_t first_peak_tensor_bytes = 0;
  int first_in_flight = 0;  // micro-batches the first stage holds at most
};

struct StagesReport {
  StagesOptions options;
  int micro_batches = 0;
  std::vector<StagesRow> rows;
};

// UsageError for bad options (before any run); RuntimeError if a run fails.
StagesReport RunStagesBench(const StagesOptions& options);
std::string StagesJson(const StagesReport& report);
std::string StagesTable(const StagesReport& report);

}  // namespace up::bench
