// The layout of a recording (`train --record DIR`), shared by the stages that
// write it, the stages that replay it, and the launcher's `check` and
// `inspect`. Torch-free.
//
//   DIR/config.yaml                  the resolved config (written by the launcher)
//   DIR/fwd-s{S}-m{M}.pt             two stages: the boundary sent by the encoder
//                                    (bottleneck, skip0..)
//   DIR/bwd-s{S}-m{M}.pt             their gradients, sent by the decoder
//   DIR/fwd-c{C}-s{S}-m{M}.pt        more stages: what channel C of the layout
//   DIR/bwd-c{C}-s{S}-m{M}.pt        (common/layout/pipeline_layout.h) carried forward,
//                                    and the gradients it carried back
//   DIR/{stage}-weights-s{S}.pt      parameters and buffers at the start of step S
//                                    (also after the last recorded step)
//   DIR/{stage}-s{S}.stage           the same as a stage file (weights, optimizer,
//                                    RNG): what replay starts from
//   DIR/{stage}-step-norms-s{S}.pt   every stage's grad norms its step S was given
//   DIR/{stage}.jsonl                each stage's index lines, as written
//                                    ({stage}: the part's key, "encoder2")
//   DIR/index.json                   the merged index (written by the launcher)
//
// Only the sender records a boundary message; the loss is recorded by the
// last stage. `.pt` files are dicts of tensors
// that Python's torch.load reads (weights_only=True); `.stage` files are
// LibTorch archives. Steps S are 0-based optimizer steps.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace up::recording {

inline constexpr const char* kFormat = "unet-pipeline-recording";
inline constexpr int kVersion = 3;  // 3: any number of stages (channels, stages)
inline constexpr const char* kIndexFile = "index.json";
inline constexpr const char* kConfigFile = "config.yaml";

// `channel` < 0: the two-stage name (the layout's one channel).
std::string BoundaryFile(const std::string& direction, int64_t step, int micro_batch,
                         int channel = -1);
// The `channel` argument BoundaryFile takes for a layout of `channels` channels.
inline int FileChannel(int channel, size_t channels) { return channels > 1 ? channel : -1; }
std::string WeightsFile(const std::string& stage, int64_t step);
std::string StageFile(const std::string& stage, int64_t step);
std::string StepNormsFile(const std::string& stage, int64_t step);
std::string PartIndexFile(const std::string& stage);

// One index line. kind: "boundary" (direction "forward"/"backward"),
// "weights", "stage_file", "step_norms",
// "loss" (value = the micro-batch's scaled loss; no file). A boundary
// entry names its channel (the layout's index; 0 with two stages).
struct Entry {
  std::string kind, stage, file, direction;
  int channel = 0;
  int64_t step = -1;
  int micro_batch = -1;
  double value = 0;
};

struct Index {
  std::vector<int64_t> steps;  // the recorded steps, ascending
  int micro_batches = 0;
  std::vector<Entry> entries;
  // The entry of this kind/stage/step/micro-batch, or nullptr.
  const Entry* Find(const std::string& kind, const std::string& who, int64_t step,
                    int micro_batch = -1) const;
  // The boundary message of `direction` on `channel`, or nullptr.
  const Entry* FindBoundary(const std::string& direction, int channel, int64_t step,
                            int micro_batch) const;
};

// Reads DIR/index.json. UsageError when it is missing or malformed.
Index ReadIndex(const std::string& dir);

// Merges DIR/{stage}.jsonl of each of `stages` (keys, in pipeline order) into
// DIR/index.json, adding the config's hash and the recording's steps.
// RuntimeError on I/O.
void WriteIndex(const std::string& dir, const std::string& config_yaml, int micro_batches,
                const std::vector<std::string>& stages);

}  // namespace up::recording
