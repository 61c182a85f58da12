// The tensor bytes each way of training will hold, measured rather than
// estimated, for `unet-pipeline plan`: each way trains for real (2 steps,
// this machine's CPU, the counting allocator of tensor_accounting.h) at two
// patches no larger than the config's (and within a voxel cap, so a 16 GiB
// model is measured in seconds), and its peaks are extrapolated to the
// config's patch along the line through the two.
//
// Why a line is exact for a U-Net: with every axis a multiple of 2^levels,
// each level's voxel count is the patch's divided by 2^(dims*level), so
// every activation, skip and boundary tensor grows in proportion to the
// patch's voxels, while weights, gradients and optimizer state do not grow
// at all: two patches fix the slope and the intercept. Each peak is a
// maximum of such lines (the forward/backward work, the optimizer step,
// which the trainers report apart), and where a different one dominates at a
// small patch the line would bend; so the probes are the config's patch
// halved along its largest axis, as little as the cap allows. Precision,
// micro-batches, checkpointing, activation policy and parking all stay as
// the config has them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/config/config.h"

namespace up {

struct ProbeWay {
  std::string name;  // the plan row it measures
  bool single_process = false;
  std::vector<std::string> sets;  // "key=value" overrides for this way
};

struct ProbedBytes {
  int64_t device = 0;  // the device's peak tensor bytes at the config's patch
  // The pipeline's stages, each its own peak, in pipeline order ("encoder",
  // "decoder"; with parts "encoder1" .. "decoder2"); empty for single-process.
  std::vector<std::pair<std::string, int64_t>> stages;
  // What its processes hold in host memory together: the sum of their peak
  // resident sizes (summary.json's peak_rss_bytes, the launcher's included),
  // extrapolated along the same line. On this CPU, device tensors included;
  // a shared ring's pages count in both its processes (host_budget.h).
  int64_t host = 0;
};

inline constexpr int64_t kProbeVoxels = 1 << 18;  // 64^3, 512^2

// Whether the probes run on one thread (train.threads=1): at bf16, where
// oneDNN's convolution backward takes scratch on the CPU for each thread, in
// proportion to the patch (brats16g at 48x48x96: 687 MB at 1 thread, 730 at
// 2, 865 at 8), which no card holds. Other precisions probe at the config's
// threads, as the real runs plan is checked against do (brats16g's fp32
// bytes are the same at 1 and 8 threads; fp16's too, on LibTorch's own slow
// CPU convolution).
bool ProbesOnOneThread(const Config& config);

// The two probe patches for `config`, smaller first (each axis a multiple of
// 2^levels and at least twice that).
std::vector<std::vector<int>> ProbePatches(const Config& config, int64_t max_voxels);

// Trains each way at both probe patches (`config_path` with `overrides`,
// as the user gave them) and extrapolates. RuntimeError naming the way and
// the run's last line if a probe fails.
std::vector<ProbedBytes> ProbeTensorBytes(const std::string& config_path,
                                          const std::vector<std::string>& overrides,
                                          const Config& config, const std::vector<ProbeWay>& ways,
                                          int64_t max_voxels = kProbeVoxels);

}  // namespace up
