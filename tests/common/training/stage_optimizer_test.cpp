// The learning-rate schedules, nnU-Net's poly among them, and Nesterov SGD.
#include "common/training/stage_optimizer.h"

#include <gtest/gtest.h>

#include <cmath>

namespace up {
namespace {

TEST(ScheduledLrTest, PolyIsNnunetsPerEpochDecay) {
  TrainConfig t;
  t.lr = 1e-2;
  t.lr_schedule = LrSchedule::kPoly;
  t.poly_exponent = 0.9;
  t.steps_per_epoch = 250;
  t.steps = 1000 * 250;
  // nnU-Net's PolyLRScheduler: initial * (1 - epoch / epochs)^0.9, the same
  // all through an epoch.
  EXPECT_DOUBLE_EQ(ScheduledLr(t, 0), 1e-2);
  EXPECT_DOUBLE_EQ(ScheduledLr(t, 249), 1e-2);
  EXPECT_DOUBLE_EQ(ScheduledLr(t, 250), 1e-2 * std::pow(1.0 - 1.0 / 1000, 0.9));
  EXPECT_DOUBLE_EQ(ScheduledLr(t, 999 * 250 + 249), 1e-2 * std::pow(1.0 - 999.0 / 1000, 0.9));
  // A last, partial epoch counts as one.
  t.steps = 5;
  t.steps_per_epoch = 2;
  EXPECT_DOUBLE_EQ(ScheduledLr(t, 4), 1e-2 * std::pow(1.0 - 2.0 / 3, 0.9));
  // No epochs given: every step is one.
  t.steps_per_epoch = 0;
  EXPECT_DOUBLE_EQ(ScheduledLr(t, 4), 1e-2 * std::pow(1.0 - 4.0 / 5, 0.9));
}

TEST(StageOptimizerTest, NesterovStepsAsTorchsSgdDoes) {
  // One parameter, gradient 1: plain momentum and Nesterov differ from the
  // second step (v = mu v + g; Nesterov steps by g + mu v).
  TrainConfig t;
  t.optimizer = Optimizer::kSgd;
  t.lr = 0.5;
  t.momentum = 0.9;
  for (bool nesterov : {false, true}) {
    t.nesterov = nesterov;
    torch::nn::Linear module(torch::nn::LinearOptions(1, 1).bias(false));
    {
      torch::NoGradGuard no_grad;
      module->weight.fill_(0);
    }
    StageOptimizer opt(*module, t);
    for (int step = 0; step < 2; ++step) {
      opt.BeginStep(step);
      module->weight.mutable_grad() = torch::ones_like(module->weight);
      opt.Step(opt.GradNorms());
    }
    // Spent gradients are dropped, so a parked stage does not carry them.
    EXPECT_FALSE(module->weight.grad().defined());
    // Plain: -0.5 * (1 + 1.9) = -1.45; Nesterov: -0.5 * (1.9 + 2.71) = -2.305.
    EXPECT_NEAR(module->weight.item<float>(), nesterov ? -2.305f : -1.45f, 1e-6) << nesterov;
  }
}

}  // namespace
}  // namespace up
