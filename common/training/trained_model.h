// A trained split U-Net loaded back from a run for `predict` and `export`:
// the run's config and both halves' weights from one checkpoint, in eval
// mode (BatchNorm uses its running statistics). Owns its modules; not shared
// between threads.
#pragma once

#include <cstdint>
#include <string>

#include "common/config/config.h"
#include "common/model/unet.h"

namespace up {

struct TrainedModel {
  Config config;               // the run's resolved config (config.yaml)
  int64_t step = 0;            // the checkpoint's step
  std::string checkpoint_dir;  // .../checkpoints/step-N
  UNetEncoder encoder{nullptr};
  UNetDecoder decoder{nullptr};

  // logits (N, num_classes, *S) for images (N, in_channels, *S), no grad,
  // on the modules' device.
  torch::Tensor Logits(const torch::Tensor& images);
};

// `dir` is a run folder (its newest checkpoint that verifies is used) or one
// checkpoint folder (`RUN/checkpoints/step-N`). UsageError naming `dir` and
// what to give instead when it is neither or holds no checkpoint.
TrainedModel LoadTrainedModel(const std::string& dir);

// The weights a run's training starts from (its config's train.seed), step
// 0, as every trainer builds them: for comparing with another trainer from
// the same start. `dir` is a run folder.
TrainedModel InitialModel(const std::string& dir);

}  // namespace up
