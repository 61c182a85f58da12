// One stage's optimizer: learning-rate schedule, gradient clipping over the
// global norm of BOTH stages, and the step.
//
// The reference trainer holds two of these (encoder, decoder) and each stage
// process holds one, so both ways of training run the same code. Clipping
// needs every parameter's gradient norm: GradNorms() gives this stage's, in
// parameter order; Step() takes the encoder's then the decoder's norms
// concatenated and computes the total norm from them, identically everywhere.
#pragma once

#include <torch/torch.h>

#include <memory>

#include "common/config.h"

namespace up {

// The learning rate of optimizer step `step` (0-based): linear warm-up over
// `warmup_steps`, then constant or cosine decay to 0 at `steps`.
double ScheduledLr(const TrainConfig& train, int64_t step);

class StageOptimizer {
 public:
  StageOptimizer(torch::nn::Module& module, const TrainConfig& train);

  // Sets the scheduled learning rate and drops the gradients.
  void BeginStep(int64_t step);

  // (P,) float32: the L2 norm of each parameter's gradient (0 when none).
  torch::Tensor GradNorms() const;

  // Clips (when train.grad_clip > 0) with the total norm of `all_norms`, the
  // concatenated GradNorms() of the encoder then the decoder, then steps.
  void Step(const torch::Tensor& all_norms);

  torch::optim::Optimizer& optimizer() { return *optimizer_; }
  bool needs_global_norms() const { return train_.grad_clip > 0; }

 private:
  TrainConfig train_;
  std::vector<torch::Tensor> params_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
};

}  // namespace up
