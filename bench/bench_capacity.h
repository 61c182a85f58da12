// `unet-pipeline bench capacity`: how large a U-Net (or patch) each way of
// training fits in a device of `--budget` bytes, measured by training it:
// for each way (single-process plain, with micro-batches of one sample, with
// checkpointing, with both; the pipeline keeping activations; the pipeline
// recomputing them with its stages parked between turns, with the config's
// micro-batches and with one sample each) a search over one integer scale
// finds the largest that trains `steps` steps under train.memory_budget
// without running out. The widths scale together (features: level 0's width
// is the scale, the others keep their ratios) or the patch does (patch: each
// axis in steps of 2^levels, in the config's proportions). Where the model
// can have lean blocks, three ways come again with model.memory: lean (plain
// single-process and the two that hold least), named "<way>, lean".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace up::bench {

struct CapacityOptions {
  std::string config;
  std::string budget;              // "64MiB", as train.memory_budget takes it
  std::string scale = "features";  // features | patch
  int64_t steps = 2;               // per probe
  int max_scale = 4096;            // the search stops here (a budget too large for the machine)
  std::vector<std::string> sets;   // "key=value" overrides for every run
  std::vector<std::string> ways;   // only these (by name); empty: every way
};

struct CapacityRow {
  std::string way;   // "single-process", ..., "pipeline recompute+park"
  int scale = 0;     // the largest that trained; 0: not even the smallest
  std::string size;  // "features [24, 48, 96, 192]" or "patch 96x96"
  int64_t parameters = 0;
  int64_t voxels = 0;             // of the patch
  int64_t peak_device_bytes = 0;  // peak_device_tensor_bytes of that run
  double step_s = 0;              // its last step
  int probes = 0;                 // training runs the search took
  double vs_plain = 0;  // parameters (features) or voxels (patch) against plain single-process
  double vs_best_single = 0;   // the same against the best single-process way
  bool lean = false;           // model.memory: lean
  double vs_best_written = 0;  // the same against the best way as written (not lean)
};

struct CapacityReport {
  CapacityOptions options;
  int64_t budget_bytes = 0;
  std::vector<CapacityRow> rows;
};

// UsageError for bad options; RuntimeError if a probe fails other than by
// running out of memory.
CapacityReport RunCapacityBench(const CapacityOptions& options);

std::string CapacityJson(const CapacityReport& report);
std::string CapacityTable(const CapacityReport& report);

}  // namespace up::bench
