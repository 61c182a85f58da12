// How long each U-Net level takes, and cuts that balance it (issue 30:
// `pipeline.balance: time`). A pipeline's throughput is set by its slowest
// stage, so parts cut by time rather than by memory (level_counts.h) run the
// step closer to its bubble-limited speed, as torchgpipe's balance_by_time
// does. The times are measured on the stages' devices (common/model/
// level_timing.h, run by launcher/time_balance.h); what is here is the
// arithmetic on them and their file. Torch-free; pure functions.
#pragma once

#include <string>
#include <vector>

#include "common/config/config.h"
#include "common/layout/pipeline_layout.h"

namespace up {

// Milliseconds one micro-batch takes through each level, forward and
// backward (under recompute, its second forward too), on the device that
// timed it.
struct LevelTimes {
  std::vector<double> encoder_ms;  // levels 0..L (L: the bottleneck)
  std::vector<double> decoder_ms;  // by U-Net index 0..L-1, level 0 with its loss
  std::string encoder_device;      // where each half was timed: "cpu", "cuda:1"
  std::string decoder_device;
};

// The half's ("encoder" | "decoder") times as one JSON line, and back.
// RuntimeError naming `path` for a file that is not such a line.
std::string LevelTimesJson(const std::string& half, const std::vector<double>& ms,
                           const std::string& device);
void ReadLevelTimes(const std::string& path, LevelTimes* into);

// The cuts pipeline.balance: time gives the halves of `config` that have
// more than one part and no cuts of their own, filled into its
// pipeline.encoder_cuts / decoder_cuts (the others stay as they are):
// the parts' summed times balanced (level_partition.h's BalancedCuts, on
// microseconds). Mirrored placement: the encoder's cuts balance each
// device's work, encoder level i with decoder level i (the bottleneck with
// level L-1's part), and the decoder's mirror them. Returns whether any cut
// was filled. `times` must have L+1 and L entries (RuntimeError otherwise).
bool ApplyTimeBalance(const LevelTimes& times, Config* config);

// Whether `config` asks its cuts of the times: pipeline.balance is time and
// a half has more than one part and no cuts given.
bool NeedsLevelTimes(const Config& config);

// Each stage's summed level times for `layout` (stage order), in ms.
std::vector<double> PartTimes(const LevelTimes& times, const PipelineLayout& layout);

}  // namespace up
