// `unet-pipeline bench step`: median optimizer-step time of the pipeline next
// to the single-process trainer on the same config and threads, and of the
// three schedules with two unlocked stages. Every figure comes from real
// training runs (bench_trainer.h) alternated in one invocation: pipeline,
// single, pipeline, single, ... then sequential, gpipe, 1f1b, sequential, ...
// The first `warmup` steps of every run are dropped; a row's median pools the
// remaining steps of all its runs. Beside the single-process trainer, its
// peer in plain PyTorch: the same model trained eagerly by .venv's Python on
// the same shapes, threads, loss and optimizer (bench/eager_step.py for the
// classic U-Net and torchscript bundles, bench/nnunet_eager.py for nnU-Net
// plans), when .venv is beside the build. A last traced pipeline run shows where a
// pipeline step's time goes.
// With a budget, the offload rows (one process checkpointing, one process
// offloading, the pipeline offloading) train under that device budget as on a
// card of that size, each at the fewest micro-batches (a divisor of the
// batch) that trains under it, found by 2-step probes: what each way's step
// costs on that card, where a way that holds less runs bigger micro-batches.
// The lean group times three ways as written against the same ways with
// model.memory: lean (docs/MEMORY.md#lean-blocks), each pair alternated, at
// the config's micro-batches: what the lean blocks' recomputed norms cost.
// `only` = "lean" runs that group alone (a 3-D config's other rows take long).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/trace_breakdown.h"

namespace up::bench {

struct StepOptions {
  std::string config;
  int64_t steps = 8;              // per run
  int rounds = 3;                 // runs per row
  int64_t warmup = 2;             // leading steps of each run left out
  std::vector<std::string> sets;  // "key=value" overrides for every run
  std::string budget;             // "" or a train.memory_budget size for the offload rows
  std::string only;               // "" (every group) or "lean"
};

struct StepRow {
  std::string group;        // "pipeline_vs_single", "unlocked_schedules" or "lean_vs_written"
  std::string label;        // "single", "pipeline", "pipeline recompute", "sequential", ...
  std::string mode;         // "single", "pipeline" or "python" (the eager peer)
  std::string schedule;     // pipeline rows
  std::string lock;         // "on" / "off", as resolved for the run
  std::string activations;  // "keep" / "recompute"
  bool built = true;        // false: a row this run could not measure (no figures)
  std::string note;         // why not, when !built
  double median_step_s = 0;
  std::vector<double> run_medians_s;  // one per run, to judge the spread
  int64_t samples = 0;                // steps pooled into the median
  std::string ratio_to;               // the peer row's label ("" for none)
  double ratio = 0;                   // median_step_s / the peer's
  // The run's processes' peak RSS added up (trainer, or launcher + encoder +
  // decoder), the largest over the row's runs; 0 for the Python peer.
  int64_t peak_rss_bytes = 0;
  int micro_batches = 0;  // with a budget: the fewest that train under it (0: the config's)
};

struct StepReport {
  StepOptions options;
  int threads = 0;           // train.threads of the config
  int64_t budget_bytes = 0;  // the offload rows' device budget (0: none)
  std::vector<StepRow> rows;
  // One more "pipeline" run, traced and not timed with the rows (tracing
  // costs a little): where its steps' time went (trace_breakdown.h), and
  // its mean step time (wall) next to it.
  StepBreakdown breakdown;
  double traced_mean_step_s = 0;
};

// UsageError for bad options or a bad config (before any run starts);
// RuntimeError if a training run fails.
StepReport RunStepBench(const StepOptions& options);

std::string StepJson(const StepReport& report);
std::string StepTable(const StepReport& report);

}  // namespace up::bench
