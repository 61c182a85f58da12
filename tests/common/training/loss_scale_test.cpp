// The fp16 loss scale's state machine and the optimizer's use of it: skip on a
// non-finite norm (weights untouched, scale halved), unscale before the norms,
// grow after growth_interval finite steps, save and restore with the stage file.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <unistd.h>

#include <filesystem>
#include <limits>

#include "common/training/checkpoint.h"
#include "common/training/loss_scale.h"
#include "common/training/stage_optimizer.h"

namespace up {
namespace {

TEST(LossScale, BacksOffOnInfAndGrowsAfterTheInterval) {
  LossScale s{1024.0, 0, 3};
  s.Update(false);
  s.Update(false);
  EXPECT_EQ(s.scale, 1024.0);
  EXPECT_EQ(s.growth_tracker, 2);
  s.Update(false);
  EXPECT_EQ(s.scale, 2048.0);
  EXPECT_EQ(s.growth_tracker, 0);
  s.Update(false);
  s.Update(true);  // an overflow resets the interval
  EXPECT_EQ(s.scale, 1024.0);
  EXPECT_EQ(s.growth_tracker, 0);
}

TrainConfig Fp16Train() {
  TrainConfig t;
  t.precision = Precision::kFp16;
  t.loss_scale_init = 8.0;
  t.loss_scale_growth_interval = 2;
  t.lr = 0.1;
  t.optimizer = Optimizer::kSgd;
  t.momentum = 0;
  return t;
}

TEST(StageOptimizerFp16, UnscalesThenSkipsANonFiniteStepEverywhere) {
  torch::manual_seed(0);
  torch::nn::Linear model(3, 2);
  StageOptimizer opt(*model, Fp16Train());
  EXPECT_EQ(opt.loss_scale(), 8.0);
  opt.BeginStep(0);
  torch::Tensor x = torch::ones({4, 3});
  (model(x).sum() * opt.loss_scale()).backward();
  const torch::Tensor scaled = model->weight.grad().clone();
  opt.Unscale();
  EXPECT_TRUE(torch::equal(model->weight.grad(), scaled / 8.0));

  // A peer stage's infinite norm makes this stage skip too.
  const torch::Tensor before = model->weight.detach().clone();
  torch::Tensor norms = torch::cat(
      {opt.GradNorms(), torch::tensor({std::numeric_limits<float>::infinity()}, torch::kFloat32)});
  StageOptimizer::Outcome o = opt.Step(norms);
  EXPECT_TRUE(o.skipped);
  EXPECT_EQ(o.scale, 8.0);
  EXPECT_TRUE(torch::equal(model->weight.detach(), before)) << "a skipped step changed weights";
  EXPECT_EQ(opt.loss_scale(), 4.0);

  // Finite steps update the weights; two of them double the scale.
  for (int step = 1; step <= 2; ++step) {
    opt.BeginStep(step);
    (model(x).sum() * opt.loss_scale()).backward();
    opt.Unscale();
    o = opt.Step(opt.GradNorms());
    EXPECT_FALSE(o.skipped);
  }
  EXPECT_FALSE(torch::equal(model->weight.detach(), before));
  EXPECT_EQ(opt.loss_scale(), 8.0);
}

TEST(StageOptimizerFp16, Fp32HasNoScaleAndNeedsNoGlobalNorms) {
  torch::nn::Linear model(3, 2);
  TrainConfig t;
  StageOptimizer opt(*model, t);
  EXPECT_EQ(opt.loss_scale(), 1.0);
  EXPECT_FALSE(opt.needs_global_norms());
  EXPECT_TRUE(StageOptimizer(*model, Fp16Train()).needs_global_norms());
}

TEST(StageOptimizerFp16, TheScaleTravelsInTheStageFile) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("up-scale-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  torch::nn::Linear a(3, 2), b(3, 2);
  StageOptimizer opt_a(*a, Fp16Train()), opt_b(*b, Fp16Train());
  opt_a.loss_scale_state() = {512.0, 1, 2};
  SaveStageFile((dir / "s.pt").string(), *a, opt_a.optimizer(), 3, &opt_a.loss_scale_state());
  EXPECT_EQ(
      LoadStageFile((dir / "s.pt").string(), *b, opt_b.optimizer(), &opt_b.loss_scale_state()), 3);
  EXPECT_EQ(opt_b.loss_scale(), 512.0);
  EXPECT_EQ(opt_b.loss_scale_state().growth_tracker, 1);
  // A file written without a scale (an fp32 run) leaves the scale as it is.
  SaveStageFile((dir / "plain.pt").string(), *a, opt_a.optimizer(), 3);
  LossScale untouched{8.0, 0, 2};
  LoadStageFile((dir / "plain.pt").string(), *b, opt_b.optimizer(), &untouched);
  EXPECT_EQ(untouched.scale, 8.0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace up
