// See stage_optimizer.h.
#include "common/training/stage_optimizer.h"

#include <cmath>

namespace up {

double ScheduledLr(const TrainConfig& t, int64_t step) {
  if (step < t.warmup_steps) return t.lr * static_cast<double>(step + 1) / t.warmup_steps;
  if (t.lr_schedule == LrSchedule::kPoly) {
    // nnU-Net's PolyLRScheduler, stepped at each epoch's start: the rate is
    // constant within an epoch of steps_per_epoch steps.
    const int64_t per = std::max(1, t.steps_per_epoch);
    const int64_t epochs = (t.steps + per - 1) / per;
    const int64_t epoch = step / per;
    return t.lr * std::pow(1.0 - static_cast<double>(epoch) / static_cast<double>(epochs),
                           t.poly_exponent);
  }
  if (t.lr_schedule == LrSchedule::kCosine) {
    const double span = std::max<int64_t>(1, t.steps - t.warmup_steps);
    const double progress = static_cast<double>(step - t.warmup_steps) / span;
    return 0.5 * t.lr * (1.0 + std::cos(M_PI * progress));
  }
  return t.lr;
}

StageOptimizer::StageOptimizer(torch::nn::Module& module, const TrainConfig& train)
    : train_(train),
      fp16_(train.precision == Precision::kFp16),
      scale_{train.loss_scale_init, 0, train.loss_scale_growth_interval},
      params_(module.parameters(/*recurse=*/true)) {
  if (train.optimizer == Optimizer::kSgd) {
    optimizer_ =
        std::make_unique<torch::optim::SGD>(params_, torch::optim::SGDOptions(train.lr)
                                                         .momentum(train.momentum)
                                                         .nesterov(train.nesterov)
                                                         .weight_decay(train.weight_decay));
  } else {
    optimizer_ = std::make_unique<torch::optim::Adam>(
        params_, torch::optim::AdamOptions(train.lr).weight_decay(train.weight_decay));
  }
}

void StageOptimizer::BeginStep(int64_t step) {
  const double lr = ScheduledLr(train_, step);
  for (auto& group : optimizer_->param_groups()) group.options().set_lr(lr);
  optimizer_->zero_grad(/*set_to_none=*/true);
}

torch::Tensor StageOptimizer::GradNorms() const {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> norms;
  for (const auto& p : params_) {
    norms.push_back(p.grad().defined() ? p.grad().detach().norm(2).to(torch::kCPU, torch::kFloat32)
                                       : torch::zeros({}, torch::kFloat32));
  }
  return torch::stack(norms);  // (P,)
}

void StageOptimizer::Unscale() {
  if (!fp16_) return;
  torch::NoGradGuard no_grad;
  // As GradScaler: the reciprocal in double, applied as a float32 factor.
  const float inverse = static_cast<float>(1.0 / scale_.scale);
  for (auto& p : params_) {
    if (p.grad().defined()) p.grad().mul_(inverse);
  }
}

StageOptimizer::Outcome StageOptimizer::Step(const torch::Tensor& all_norms) {
  Outcome outcome;
  outcome.scale = loss_scale();
  if (fp16_) {
    // A non-finite gradient anywhere makes its norm non-finite: every stage
    // reaches the same verdict from the same concatenated norms.
    outcome.skipped = !torch::isfinite(all_norms).all().item<bool>();
    scale_.Update(outcome.skipped);
    if (outcome.skipped) {
      optimizer_->zero_grad(/*set_to_none=*/true);
      return outcome;
    }
  }
  if (train_.grad_clip > 0) {
    torch::NoGradGuard no_grad;
    const double total = all_norms.norm(2).item<double>();
    const double coef = train_.grad_clip / (total + 1e-6);
    if (coef < 1.0) {
      for (auto& p : params_) {
        if (p.grad().defined()) p.grad().mul_(coef);
      }
    }
  }
  optimizer_->step();
  // Spent: a parked stage need not carry them to host memory and back.
  optimizer_->zero_grad(/*set_to_none=*/true);
  return outcome;
}

}  // namespace up
