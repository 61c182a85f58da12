// One real training run for the benchmarks: this same binary re-run as
// `unet-pipeline train [--single-process] --config C --set ... --out DIR -q`
// in a child process, its output kept in DIR.log, and what it wrote read back:
// every step's step_s from metrics.jsonl and summary.json. The child is a
// separate process so each run pays its own start-up, owns its own memory
// figures and cannot disturb the next. Not thread-safe (waits on its child).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace up::bench {

struct TrainerSpec {
  std::string config;             // path to the YAML config
  bool single_process = false;    // the reference trainer instead of the pipeline
  std::vector<std::string> sets;  // "key=value" overrides, each passed as --set
  std::string trace;              // pipeline: write a Chrome trace here (--trace)
  std::vector<std::string> env;   // "NAME=value" added to the run's environment
};

struct TrainerResult {
  std::vector<double> step_s;  // one per step, in order
  std::string summary_json;
};

// Runs `spec` into `out` (which must not exist yet). RuntimeError with the
// run's last output line if it fails.
TrainerResult RunTrainer(const TrainerSpec& spec, const std::string& out);

// Runs a peer program (e.g. a Python eager trainer) with its output to
// `log`; the step times it printed as `{"step_s": x}` lines. RuntimeError
// (with its last line) if it fails.
std::vector<double> RunPeer(const std::vector<std::string>& args, const std::string& log);

// Peak RSS of this binary doing nothing but start (`--version`): the loaded
// LibTorch runtime that every process of a run pays. RuntimeError if it fails.
int64_t IdleProcessPeakRss();

}  // namespace up::bench
