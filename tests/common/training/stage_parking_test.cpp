// Parking: a park/unpark round trip leaves parameters, gradients, buffers and
// optimizer state bitwise unchanged, keeps the same tensor objects the
// optimizer holds, and training continues exactly as without parking.
#include "common/training/stage_parking.h"

#include <gtest/gtest.h>

#include "common/device/tensor_accounting.h"
#include "common/model/digest.h"
#include "common/model/unet.h"
#include "common/training/stage_optimizer.h"

namespace up {
namespace {

ModelConfig Small() {
  ModelConfig m;
  m.features = {4, 8};
  return m;
}

// One step of training on fixed data; with `parking`, the optimizer's state
// is fetched for the step, as a stage's turn does.
void Step(UNetEncoder& enc, StageOptimizer& opt, int64_t step, StageParking* parking = nullptr) {
  opt.BeginStep(step);
  torch::manual_seed(100 + step);
  enc->forward(torch::randn({2, 4, 8, 8})).bottleneck.square().mean().backward();
  if (parking) parking->UnparkOptimizer();
  opt.Step(opt.GradNorms());
}

int64_t Bytes(const std::vector<torch::Tensor>& tensors) {
  int64_t n = 0;
  for (const torch::Tensor& t : tensors) n += static_cast<int64_t>(t.nbytes());
  return n;
}

std::string AdamStateDigest(torch::optim::Optimizer& opt) {
  NamedTensors state;
  int i = 0;
  for (auto& p : opt.param_groups()[0].params()) {
    auto& s = static_cast<torch::optim::AdamParamState&>(*opt.state().at(p.unsafeGetTensorImpl()));
    state.emplace_back(std::to_string(i), s.exp_avg());
    state.emplace_back(std::to_string(i++) + "sq", s.exp_avg_sq());
  }
  return ParamDigest(state, {});
}

TEST(StageParking, RoundTripIsBitwiseAndKeepsTensorObjects) {
  TrainConfig t;
  UNetEncoder enc(Small(), 1);
  StageOptimizer opt(*enc, t);
  Step(enc, opt, 0);
  const std::string weights = ParamDigest(NamedState(*enc), {});
  const std::string adam = AdamStateDigest(opt.optimizer());
  const auto* impl = enc->parameters()[0].unsafeGetTensorImpl();
  const void* storage = enc->parameters()[0].data_ptr();

  StageParking parking(*enc, opt.optimizer(), torch::kCPU);
  parking.Park();
  EXPECT_TRUE(parking.parked());
  EXPECT_GT(parking.parked_bytes(), 0);
  EXPECT_NE(enc->parameters()[0].data_ptr(), storage)
      << "parked state lives in the parking buffers";
  parking.Unpark();
  EXPECT_EQ(enc->parameters()[0].unsafeGetTensorImpl(), impl)
      << "the optimizer's tensor objects must stay";
  EXPECT_EQ(ParamDigest(NamedState(*enc), {}), weights);
  EXPECT_EQ(AdamStateDigest(opt.optimizer()), adam);
}

TEST(StageParking, TrainingWithParkingBetweenStepsEqualsWithout) {
  TrainConfig t;
  UNetEncoder a(Small(), 1), b(Small(), 1);
  StageOptimizer opt_a(*a, t), opt_b(*b, t);
  StageParking parking(*b, opt_b.optimizer(), torch::kCPU);
  for (int64_t s = 0; s < 4; ++s) {
    Step(a, opt_a, s);
    ParkedOutsideTurn turn(&parking);  // unpark for the step ...
    Step(b, opt_b, s, &parking);
  }  // ... and park after it
  EXPECT_TRUE(parking.parked());
  parking.Unpark();
  EXPECT_EQ(ParamDigest(NamedState(*a), {}), ParamDigest(NamedState(*b), {}));
  EXPECT_EQ(AdamStateDigest(opt_a.optimizer()), AdamStateDigest(opt_b.optimizer()));
}

TEST(StageParking, SgdMomentumIsParkedToo) {
  TrainConfig t;
  t.optimizer = Optimizer::kSgd;
  UNetEncoder a(Small(), 1), b(Small(), 1);
  StageOptimizer opt_a(*a, t), opt_b(*b, t);
  StageParking parking(*b, opt_b.optimizer(), torch::kCPU);
  for (int64_t s = 0; s < 3; ++s) {
    Step(a, opt_a, s);
    parking.Unpark();
    Step(b, opt_b, s, &parking);
    parking.Park();
  }
  parking.UnparkOptimizer();
  EXPECT_EQ(ParamDigest(NamedState(*a), {}), ParamDigest(NamedState(*b), {}));
}

TEST(StageParking, PrefetchBeforeTheTurnEqualsUnparkingAtIt) {
  TrainConfig t;
  UNetEncoder a(Small(), 1), b(Small(), 1);
  StageOptimizer opt_a(*a, t), opt_b(*b, t);
  StageParking parking(*b, opt_b.optimizer(), torch::kCPU);
  parking.Park();
  for (int64_t s = 0; s < 3; ++s) {
    Step(a, opt_a, s);
    parking.Prefetch();  // while the other stage computes
    EXPECT_FALSE(parking.parked());
    parking.Prefetch();  // a second hint is a no-op
    ParkedOutsideTurn turn(&parking);
    Step(b, opt_b, s, &parking);
  }
  // A prefetch with no turn after it parks cleanly too.
  parking.Prefetch();
  parking.Park();
  EXPECT_TRUE(parking.parked());
  parking.Unpark();
  EXPECT_EQ(ParamDigest(NamedState(*a), {}), ParamDigest(NamedState(*b), {}));
  EXPECT_EQ(AdamStateDigest(opt_a.optimizer()), AdamStateDigest(opt_b.optimizer()));
}

TEST(ShouldPark, OnlySharedGpusParkByDefault) {
  EXPECT_FALSE(ShouldPark(Park::kAuto, torch::kCPU, torch::kCPU));
  EXPECT_TRUE(ShouldPark(Park::kAlways, torch::kCPU, torch::kCPU));
  EXPECT_FALSE(ShouldPark(Park::kNever, torch::Device("cuda:0"), torch::Device("cuda:0")));
  EXPECT_TRUE(ShouldPark(Park::kAuto, torch::Device("cuda:0"), torch::Device("cuda:0")));
  EXPECT_FALSE(ShouldPark(Park::kAuto, torch::Device("cuda:0"), torch::Device("cuda:1")));
  // A CPU device under train.memory_budget is a card the stages share.
  EXPECT_TRUE(ShouldPark(Park::kAuto, torch::kCPU, torch::kCPU, /*budgeted=*/true));
  EXPECT_FALSE(ShouldPark(Park::kNever, torch::kCPU, torch::kCPU, /*budgeted=*/true));
}

TEST(StageParking, ParkedStateLeavesTheDevice) {
  InstallTensorAccounting();
  UNetEncoder enc(Small(), 1);
  TrainConfig t;
  StageOptimizer opt(*enc, t);
  Step(enc, opt, 0);  // gradients and Adam's moments exist now
  const torch::Device cpu(torch::kCPU);
  const int64_t resident = TensorBytesOn(cpu).live;
  StageParking parking(*enc, opt.optimizer(), cpu);
  parking.Park();
  ASSERT_GT(parking.parked_bytes(), 0);
  // Parameters, gradients, both moments and buffers are in host buffers,
  // outside the device's count (as pinned memory is outside a GPU's).
  EXPECT_EQ(resident - TensorBytesOn(cpu).live, parking.parked_bytes());
  // A turn's forward and backward get the model's part; the moments stay in
  // host memory until the optimizer's step.
  parking.Unpark();
  int64_t moments = 0;
  for (auto& p : opt.optimizer().param_groups()[0].params()) {
    auto& s = static_cast<torch::optim::AdamParamState&>(
        *opt.optimizer().state().at(p.unsafeGetTensorImpl()));
    moments += Bytes({s.exp_avg(), s.exp_avg_sq()});
  }
  EXPECT_EQ(resident - TensorBytesOn(cpu).live, moments);
  parking.UnparkOptimizer();
  EXPECT_EQ(TensorBytesOn(cpu).live, resident);
  Step(enc, opt, 1, &parking);  // and training goes on
}

TEST(StageParking, WhatATurnLeftUnchangedParksWithoutACopy) {
  UNetEncoder enc(Small(), 1);
  TrainConfig t;
  StageOptimizer opt(*enc, t);
  StageParking parking(*enc, opt.optimizer(), torch::kCPU);
  parking.Park();
  Step(enc, opt, 0);  // on the parked state: Adam's moments exist now
  parking.UnparkOptimizer();
  parking.Park();
  const int64_t buffers = Bytes(enc->buffers());
  const int64_t weights = Bytes(enc->parameters());
  ASSERT_GT(weights, 0);

  // A forward-only turn changes no weight: only the buffers (running
  // statistics, which may change unseen) go back by copy.
  int64_t out = parking.bytes_out();
  {
    ParkedOutsideTurn turn(&parking);
    torch::NoGradGuard no_grad;
    enc->forward(torch::randn({2, 4, 8, 8}));
  }
  EXPECT_EQ(parking.bytes_out() - out, buffers);

  // A turn with the step changes the weights, their moments and no
  // gradient (spent, dropped): all of those go back by copy.
  out = parking.bytes_out();
  const int64_t in = parking.bytes_in();
  {
    ParkedOutsideTurn turn(&parking);
    Step(enc, opt, 1, &parking);
  }
  EXPECT_EQ(parking.bytes_in() - in, weights + buffers + 2 * weights);  // + Adam's two moments
  EXPECT_EQ(parking.bytes_out() - out, weights + buffers + 2 * weights);
  for (const auto& p : enc->parameters()) EXPECT_FALSE(p.grad().defined());
}

}  // namespace
}  // namespace up
