// Activation checkpointing of one level, for `train.checkpointing: levels`:
// what torch.utils.checkpoint (reentrant) does, for C++ modules. The forward
// runs without a graph and keeps only the level's inputs; backward runs the
// level again with a graph and backpropagates through it. The recompute
// runs under the autocast state the forward had, and leaves the module's
// buffers (BatchNorm's running statistics) as the forward left them, so they
// are updated once per forward, exactly as without checkpointing; gradients
// are the same, bit for bit, as the level's without checkpointing.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <vector>

namespace up {

class ActivationOffload;

using LevelFn = std::function<torch::Tensor(const std::vector<torch::Tensor>&)>;

// `fn(inputs)` with its activations recomputed in backward. `modules` hold
// the level's parameters and buffers; they and `fn` must outlive the backward. Without grad
// mode (or with no input or parameter needing a gradient) it is just fn(inputs).
// With `offload`, the kept inputs wait in its host memory instead of on the
// device (activation_offload.h); it must outlive the backward too. Fetched
// back, an input the rebuilt graph does not save leaves the device before
// the backward through the unit runs.
torch::Tensor CheckpointedLevel(const std::vector<torch::nn::Module*>& modules, LevelFn fn,
                                const std::vector<torch::Tensor>& inputs,
                                ActivationOffload* offload = nullptr);

}  // namespace up
