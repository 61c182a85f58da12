// Parking: a park/unpark round trip leaves parameters, gradients, buffers and
// optimizer state bitwise unchanged, keeps the same tensor objects the
// optimizer holds, and training continues exactly as without parking.
#include "common/model/stage_parking.h"

#include <gtest/gtest.h>

#include "common/model/digest.h"
#include "common/model/stage_optimizer.h"
#include "common/model/tensor_accounting.h"
#include "common/model/unet.h"

namespace up {
namespace {

ModelConfig Small() {
  ModelConfig m;
  m.features = {4, 8};
  return m;
}

// One step of training on fixed data.
void Step(UNetEncoder& enc, StageOptimizer& opt, int64_t step) {
  opt.BeginStep(step);
  torch::manual_seed(100 + step);
  enc->forward(torch::randn({2, 4, 8, 8})).bottleneck.square().mean().backward();
  opt.Step(opt.GradNorms());
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
    Step(b, opt_b, s);
  }  // ... and park after it
  EXPECT_TRUE(parking.parked());
  parking.Unpark();
  EXPECT_EQ(ParamDigest(NamedState(*a), {}), ParamDigest(NamedState(*b), {}));
  EXPECT_EQ(AdamStateDigest(opt_a.optimizer()), AdamStateDigest(opt_b.optimizer()));
}

TEST(StageParking, SgdMomentumIsParkedToo) {
  TrainConfig t;
  t.optimizer = "sgd";
  UNetEncoder a(Small(), 1), b(Small(), 1);
  StageOptimizer opt_a(*a, t), opt_b(*b, t);
  StageParking parking(*b, opt_b.optimizer(), torch::kCPU);
  for (int64_t s = 0; s < 3; ++s) {
    Step(a, opt_a, s);
    parking.Unpark();
    Step(b, opt_b, s);
    parking.Park();
  }
  parking.Unpark();
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
    Step(b, opt_b, s);
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
  EXPECT_FALSE(ShouldPark("auto", torch::kCPU, torch::kCPU));
  EXPECT_TRUE(ShouldPark("always", torch::kCPU, torch::kCPU));
  EXPECT_FALSE(ShouldPark("never", torch::Device("cuda:0"), torch::Device("cuda:0")));
  EXPECT_TRUE(ShouldPark("auto", torch::Device("cuda:0"), torch::Device("cuda:0")));
  EXPECT_FALSE(ShouldPark("auto", torch::Device("cuda:0"), torch::Device("cuda:1")));
  // A CPU device under train.memory_budget is a card the stages share.
  EXPECT_TRUE(ShouldPark("auto", torch::kCPU, torch::kCPU, /*budgeted=*/true));
  EXPECT_FALSE(ShouldPark("never", torch::kCPU, torch::kCPU, /*budgeted=*/true));
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
  parking.Unpark();
  EXPECT_EQ(TensorBytesOn(cpu).live, resident);
  Step(enc, opt, 1);  // and training goes on
}

}  // namespace
}  // namespace up
