// `unet-pipeline bench memory`: the peak resident memory of each pipeline
// process (encoder, decoder, launcher) against the single-process trainer's on
// the same config, from one real run of each (bench_trainer.h), and the ratio
// of the larger stage to the single process. Peak device memory is reported
// only where a GPU is visible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace up::bench {

struct MemoryOptions {
  std::string config;
  int64_t steps = 3;              // per run; the optimizer state exists from the first step
  std::vector<std::string> sets;  // "key=value" overrides for both runs
};

struct MemoryReport {
  MemoryOptions options;
  int64_t trainer = 0;  // peak RSS bytes of the single-process trainer
  int64_t encoder = 0;
  int64_t decoder = 0;
  int64_t launcher = 0;
  int64_t ring_bytes = 0;  // both rings' slots, shared memory counted in each RSS that touched it
  int64_t runtime = 0;     // peak RSS of an idle process of this build (LibTorch loaded)
  int64_t encoder_params = 0;
  int64_t decoder_params = 0;
  std::string larger_stage;
  // Peak tensor bytes (tensor_accounting.h: measured, no runtime, no rings).
  int64_t trainer_tensors = 0;
  int64_t encoder_tensors = 0;
  int64_t decoder_tensors = 0;
  std::string larger_tensor_stage;
  double tensor_ratio = 0;  // max(encoder, decoder) / trainer in tensor bytes: the target's figure
  double ratio = 0;         // max(encoder, decoder) / trainer
  double ratio_above_runtime = 0;  // the same with `runtime` taken off each side
  double target_ratio = 0.6;
  std::string device_memory;  // "no GPU", or why it is not measured
};

// UsageError for bad options or a bad config; RuntimeError if a run fails.
MemoryReport RunMemoryBench(const MemoryOptions& options);

std::string MemoryJson(const MemoryReport& report);
std::string MemoryTable(const MemoryReport& report);

}  // namespace up::bench
