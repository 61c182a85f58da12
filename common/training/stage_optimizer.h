// One stage's optimizer: learning-rate schedule, gradient clipping over the
// global norm of BOTH stages, and the step.
//
// The reference trainer holds two of these (encoder, decoder) and each stage
// process holds one, so both ways of training run the same code. Clipping
// needs every parameter's gradient norm: GradNorms() gives this stage's, in
// parameter order; Step() takes the encoder's then the decoder's norms
// concatenated and computes the total norm from them, identically everywhere.
//
// Under `train.precision: fp16` it also keeps the dynamic loss scale
// (loss_scale.h): the trainer multiplies the loss by loss_scale(), calls
// Unscale() once a step's backward is complete (before GradNorms, so norms
// and clipping see unscaled gradients), and Step() skips the update when any
// of the norms it is given (every stage's) is not finite.
#pragma once

#include <torch/torch.h>

#include <memory>

#include "common/config/config.h"
#include "common/training/loss_scale.h"

namespace up {

// The learning rate of optimizer step `step` (0-based): linear warm-up over
// `warmup_steps`, then constant, cosine decay to 0 at `steps`, or poly
// (nnU-Net's, per epoch of `steps_per_epoch`).
double ScheduledLr(const TrainConfig& train, int64_t step);

// Whether a step needs every stage's gradient norms first: for clipping's
// global norm and for fp16's "found inf" verdict. The launcher's schedule and
// every StageOptimizer ask this one function.
inline bool NeedsGlobalNorms(const TrainConfig& train) {
  return train.grad_clip > 0 || train.precision == Precision::kFp16;
}

class StageOptimizer {
 public:
  StageOptimizer(torch::nn::Module& module, const TrainConfig& train);

  // Sets the scheduled learning rate and drops the gradients.
  void BeginStep(int64_t step);

  // (P,) float32: the L2 norm of each parameter's gradient (0 when none).
  torch::Tensor GradNorms() const;

  // What the loss is multiplied by before backward (1 unless fp16).
  double loss_scale() const { return fp16_ ? scale_.scale : 1.0; }
  // fp16: divides every gradient by the loss scale (no-op otherwise).
  void Unscale();

  struct Outcome {
    bool skipped = false;  // fp16: a gradient was not finite, no update
    double scale = 1.0;    // the loss scale this step's loss used
  };
  // Clips (when train.grad_clip > 0) with the total norm of `all_norms`, the
  // concatenated GradNorms() of the encoder then the decoder, then steps;
  // under fp16 skips instead when any norm is not finite, and updates the scale.
  // Either way the gradients are spent: it drops them (set to none).
  Outcome Step(const torch::Tensor& all_norms);

  torch::optim::Optimizer& optimizer() { return *optimizer_; }
  // Whether Step needs every stage's norms: for clipping and for fp16's verdict.
  bool needs_global_norms() const { return NeedsGlobalNorms(train_); }
  LossScale& loss_scale_state() { return scale_; }

 private:
  TrainConfig train_;
  bool fp16_;
  LossScale scale_;
  std::vector<torch::Tensor> params_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
};

}  // namespace up
