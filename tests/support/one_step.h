// Test support: one forward and backward of a U-Net in this process, on
// seeded data, its levels or blocks recomputed (their inputs offloaded to
// host memory on request), with the tensor bytes it held at its peak.
#pragma once

#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

#include "common/config/config.h"
#include "common/model/unet.h"

namespace up::test {

struct OneStep {
  std::vector<std::pair<std::string, torch::Tensor>> state;  // parameters and buffers after it
  std::vector<torch::Tensor> grads;                          // each parameter's
  int64_t peak_bytes = 0;  // above what was live before the forward
};

// `model` in training mode, recomputed by `unit`, under `precision`'s
// autocast: input (shape) and targets (shape without its channels, values
// below `classes`) drawn from seed 3; the loss is the cross-entropy of the
// first output plus each further output's (deep supervision) mean square.
// With `offload`, also checks that every parked unit came back once.
// Needs InstallTensorAccounting() for peak_bytes.
OneStep ForwardBackward(UNet model, CheckpointUnit unit, Precision precision,
                        std::vector<int64_t> shape, int64_t classes, bool offload = false);

}  // namespace up::test
