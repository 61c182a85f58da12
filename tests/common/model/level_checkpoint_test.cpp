// train.checkpointing: levels and blocks, and train.offload. Recomputing each
// level (or each block inside it) in backward, with the kept inputs on the
// device or parked in host memory, gives the gradients and BatchNorm running
// statistics of plain training bit for bit (fp32 and bf16 autocast, the
// classic U-Net and both nnU-Net classes), and keeps fewer tensor bytes at
// the peak: offloaded fewer than kept, and offloaded blocks fewer than
// offloaded levels.
#include "common/model/level_checkpoint.h"

#include <gtest/gtest.h>

#include <iostream>

#include "common/config/config_file.h"
#include "common/device/tensor_accounting.h"
#include "common/model/activation_offload.h"
#include "common/model/precision.h"
#include "common/model/unet.h"
#include "tests/support/one_step.h"

namespace up {
namespace {

ModelConfig Model() {
  ModelConfig m;
  m.features = {8, 16, 32};
  m.norm = Norm::kBatch;
  return m;
}

using Trained = test::OneStep;
using test::ForwardBackward;

Trained TrainClassic(CheckpointUnit unit, Precision precision, bool offload = false) {
  return ForwardBackward(UNet(Model(), 7), unit, precision, {4, 4, 64, 64}, 3, offload);
}

void ExpectSame(const Trained& plain, const Trained& ckpt) {
  ASSERT_EQ(plain.grads.size(), ckpt.grads.size());
  for (size_t i = 0; i < plain.grads.size(); ++i) {
    ASSERT_TRUE(ckpt.grads[i].defined()) << "parameter " << i << " got no gradient";
    EXPECT_TRUE(torch::equal(plain.grads[i], ckpt.grads[i])) << "gradient " << i;
  }
  for (size_t i = 0; i < plain.state.size(); ++i) {
    EXPECT_TRUE(torch::equal(plain.state[i].second, ckpt.state[i].second))
        << plain.state[i].first << " (running statistics must be updated once)";
  }
}

TEST(LevelCheckpoint, SameGradientsAndStatisticsBitForBit) {
  InstallTensorAccounting();
  ExpectSame(TrainClassic(CheckpointUnit::kNone, Precision::kFp32),
             TrainClassic(CheckpointUnit::kLevel, Precision::kFp32));
}

TEST(LevelCheckpoint, SameUnderAutocast) {
  InstallTensorAccounting();
  ExpectSame(TrainClassic(CheckpointUnit::kNone, Precision::kBf16),
             TrainClassic(CheckpointUnit::kLevel, Precision::kBf16));
}

TEST(LevelCheckpoint, BlocksGiveTheSameGradientsAndStatistics) {
  InstallTensorAccounting();
  ExpectSame(TrainClassic(CheckpointUnit::kNone, Precision::kFp32),
             TrainClassic(CheckpointUnit::kBlock, Precision::kFp32));
  ExpectSame(TrainClassic(CheckpointUnit::kNone, Precision::kBf16),
             TrainClassic(CheckpointUnit::kBlock, Precision::kBf16));
}

// Offloaded, the kept inputs wait in (uncounted) host memory: the same bits,
// fewer tensor bytes at the peak.
TEST(LevelCheckpoint, OffloadGivesTheSameBitsWithLessOnTheDevice) {
  InstallTensorAccounting();
  const Trained plain = TrainClassic(CheckpointUnit::kNone, Precision::kFp32);
  for (CheckpointUnit unit : {CheckpointUnit::kLevel, CheckpointUnit::kBlock}) {
    const Trained kept = TrainClassic(unit, Precision::kFp32);
    const Trained parked = TrainClassic(unit, Precision::kFp32, /*offload=*/true);
    ExpectSame(plain, parked);
    EXPECT_LT(parked.peak_bytes, kept.peak_bytes)
        << "kept " << kept.peak_bytes << " B, offloaded " << parked.peak_bytes << " B";
  }
  ExpectSame(TrainClassic(CheckpointUnit::kNone, Precision::kBf16),
             TrainClassic(CheckpointUnit::kBlock, Precision::kBf16, /*offload=*/true));
}

// Offloaded, an input the rebuilt graph does not save (a concatenation's)
// leaves the device before the backward through the unit runs; one it saves
// (a product's) stays. The gradients are autograd's own.
TEST(LevelCheckpoint, OffloadLetsGoOfInputsTheGraphDoesNotSave) {
  InstallTensorAccounting();
  const torch::Device cpu(torch::kCPU);
  const int64_t n = 1 << 18;  // floats per input: 1 MiB
  const torch::Tensor a0 = torch::randn({n}), b0 = torch::randn({n});
  auto run = [&](bool checkpoint, bool multiply, std::vector<torch::Tensor>* grads) {
    const torch::Tensor a = a0.clone().requires_grad_(), b = b0.clone().requires_grad_();
    // (2n): the concatenation saves neither input, the in-place relu its
    // output; a product saves both its inputs.
    LevelFn fn = [multiply](const std::vector<torch::Tensor>& in) {
      torch::Tensor joined =
          multiply ? torch::cat({in[0] * in[1], in[1]}) : torch::cat({in[0], in[1]});
      return joined.relu_();
    };
    ActivationOffload parked(cpu);
    torch::Tensor y = checkpoint ? CheckpointedLevel({}, fn, {a, b}, &parked) : fn({a, b});
    const torch::Tensor g = torch::ones({2 * n});  // the gradient entering the unit
    const int64_t before = TensorBytesOn(cpu).live;
    ResetPeakTensorBytes(cpu);
    y.backward(g);
    const int64_t peak = TensorBytesOn(cpu).peak - before;
    *grads = {a.grad(), b.grad()};
    return peak;
  };
  std::vector<torch::Tensor> plain, rebuilt;
  run(false, false, &plain);
  const int64_t unit = 4 * n;  // bytes of one input
  // Rebuilt: the concatenation (2 units) and its gradient (2) on top of
  // the entering gradient; the two fetched inputs (2 more) are gone by then.
  const int64_t peak = run(true, false, &rebuilt);
  EXPECT_TRUE(torch::equal(plain[0], rebuilt[0]) && torch::equal(plain[1], rebuilt[1]));
  EXPECT_LT(peak, 5 * unit) << "the fetched inputs stayed through the backward";
  // A product saves its inputs: they stay, and the gradients are still exact.
  run(false, true, &plain);
  const int64_t saved_peak = run(true, true, &rebuilt);
  EXPECT_TRUE(torch::equal(plain[0], rebuilt[0]) && torch::equal(plain[1], rebuilt[1]));
  EXPECT_GT(saved_peak, peak + 2 * unit) << "a saved input was let go";
}

// What LastToRun saw: weak references to the storage of a checkpointed
// unit's rebuilt output and of the gradient entering it, and whether each
// was still alive when the unit's first operation ran its backward (the
// last of the unit's).
struct Watch {
  c10::weak_intrusive_ptr<c10::StorageImpl> output{c10::intrusive_ptr<c10::StorageImpl>()};
  c10::weak_intrusive_ptr<c10::StorageImpl> gradient{c10::intrusive_ptr<c10::StorageImpl>()};
  int backwards = 0;
  bool output_alive = true, gradient_alive = true;
};
Watch g_watch;

// A copy of its input whose backward looks at g_watch.
struct LastToRun : torch::autograd::Function<LastToRun> {
  static torch::Tensor forward(torch::autograd::AutogradContext* /*ctx*/, const torch::Tensor& x) {
    return x.clone();
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* /*ctx*/,
                                                 torch::autograd::variable_list grad) {
    ++g_watch.backwards;
    g_watch.output_alive = !g_watch.output.expired();
    g_watch.gradient_alive = !g_watch.gradient.expired();
    return {grad[0]};
  }
};

// The rebuilt unit's output is held by nothing once the backward through the
// unit has begun (nothing here saves it), and the gradient entering the unit
// by nothing once its first node has used it; both used to last until the
// unit's backward ended, two tensors of the output's size at its peak (the
// decoder's full-resolution block at brats16g's patch: two 32-channel tensors of
// 192x192x96 voxels). Exact: the gradient is autograd's own.
TEST(LevelCheckpoint, LetsGoOfItsOutputAndEnteringGradientBeforeItsBackwardEnds) {
  const torch::Tensor a0 = torch::randn({1 << 16});
  LevelFn fn = [](const std::vector<torch::Tensor>& in) {
    // (n): scaling saves no tensor and makes a new gradient, so the entering one is used up.
    torch::Tensor out = LastToRun::apply(in[0]) * 3.0;
    if (out.requires_grad()) {  // the rebuild, not the forward without a graph
      g_watch.output = out.storage().getWeakStorageImpl();
      out.register_hook(
          [](const torch::Tensor& g) { g_watch.gradient = g.storage().getWeakStorageImpl(); });
    }
    return out;
  };
  auto run = [&](bool checkpoint) {
    const torch::Tensor a = a0.clone().requires_grad_();
    torch::Tensor y = checkpoint ? CheckpointedLevel({}, fn, {a}) : fn({a});
    (y * 5.0).sum().backward();  // the gradient entering the unit: autograd's alone
    return a.grad();
  };
  const torch::Tensor plain = run(false);
  g_watch = Watch();
  const torch::Tensor rebuilt = run(true);
  ASSERT_EQ(g_watch.backwards, 1);
  EXPECT_FALSE(g_watch.output_alive) << "the rebuilt output lasted through the unit's backward";
  EXPECT_FALSE(g_watch.gradient_alive)
      << "the gradient entering the unit lasted through its backward";
  EXPECT_TRUE(torch::equal(plain, rebuilt));
}

// The host buffers are a pool: a second step reuses the first's.
TEST(ActivationOffload, FetchesWhatItParkedAndReusesItsBuffers) {
  InstallTensorAccounting();
  ActivationOffload offload(torch::Device(torch::kCPU));
  const torch::Tensor a = torch::randn({2, 3, 8, 8}), b = torch::randn({2, 6, 4, 4});
  for (int step = 0; step < 2; ++step) {
    const int ha = offload.Park({a});
    const int hb = offload.Park({b, a});
    EXPECT_EQ(offload.parked_bytes(), static_cast<int64_t>(2 * a.nbytes() + b.nbytes()));
    const std::vector<torch::Tensor> back_b = offload.Fetch(hb);
    ASSERT_EQ(back_b.size(), 2u);
    EXPECT_TRUE(torch::equal(back_b[0], b));
    EXPECT_TRUE(torch::equal(back_b[1], a));
    EXPECT_NE(back_b[1].data_ptr(), a.data_ptr()) << "a copy, not the original";
    EXPECT_TRUE(torch::equal(offload.Fetch(ha)[0], a));
    EXPECT_THROW(offload.Fetch(7), std::logic_error);
    offload.Clear();
    EXPECT_EQ(offload.parked_bytes(), 0);
  }
  EXPECT_EQ(offload.copied_out_bytes(), static_cast<int64_t>(2 * (2 * a.nbytes() + b.nbytes())));
}

// nnU-Net's blocks: a conv block each (PlainConvUNet, BatchNorm), the stem
// and each residual block (ResidualEncoderUNet), the decoder's upsampling
// with its first conv block; deep supervision's heads outside.
class NnunetBlocks : public ::testing::TestWithParam<const char*> {};

TEST_P(NnunetBlocks, SameGradientsAndStatisticsAsPlainTraining) {
  InstallTensorAccounting();
  const Config config = LoadConfigFromString(
      "{}", "test",
      {"model.kind=nnunet",
       std::string("model.plans=") + UP_SOURCE_DIR + "/configs/nnunet/tiny_plans.json",
       std::string("model.configuration=") + GetParam(), "model.in_channels=2",
       "model.num_classes=3"});
  std::vector<int64_t> shape{2, 2};
  for (int s : config.data.size) shape.push_back(s);
  auto model = [&] {
    UNet m(config.model, 5, /*deep_supervision=*/true);
    torch::NoGradGuard no_grad;  // away from the zeroed residual norms
    torch::manual_seed(11);
    for (auto& p : m->parameters()) p.add_(0.1 * torch::randn_like(p));
    return m;
  };
  const Trained plain = ForwardBackward(model(), CheckpointUnit::kNone, Precision::kFp32, shape, 3);
  ExpectSame(plain, ForwardBackward(model(), CheckpointUnit::kLevel, Precision::kFp32, shape, 3));
  ExpectSame(plain, ForwardBackward(model(), CheckpointUnit::kBlock, Precision::kFp32, shape, 3));
  ExpectSame(plain, ForwardBackward(model(), CheckpointUnit::kBlock, Precision::kFp32, shape, 3,
                                    /*offload=*/true));
}

INSTANTIATE_TEST_SUITE_P(Plans, NnunetBlocks,
                         ::testing::Values("2d", "2d_res", "3d_fullres", "3d_plain"));

TEST(LevelCheckpoint, KeepsFewerBytesAtThePeak) {
  InstallTensorAccounting();
  const Trained plain = TrainClassic(CheckpointUnit::kNone, Precision::kFp32);
  const Trained levels = TrainClassic(CheckpointUnit::kLevel, Precision::kFp32);
  EXPECT_LT(levels.peak_bytes, plain.peak_bytes * 3 / 4)
      << "plain " << plain.peak_bytes << " B, levels " << levels.peak_bytes << " B";
  // Parked, the kept inputs leave the device. Blocks keep more inputs (the
  // tensors between blocks) to rebuild less at a time: parked too, they hold
  // no more than levels (here about the same: autograd frees a level's
  // second block as its backward passes, and the first, with the
  // upsampling and the concatenation, is most of the full-resolution level).
  const Trained levels_parked =
      TrainClassic(CheckpointUnit::kLevel, Precision::kFp32, /*offload=*/true);
  const Trained blocks_parked =
      TrainClassic(CheckpointUnit::kBlock, Precision::kFp32, /*offload=*/true);
  EXPECT_LT(levels_parked.peak_bytes, levels.peak_bytes);
  EXPECT_LE(blocks_parked.peak_bytes, levels_parked.peak_bytes)
      << "levels " << levels_parked.peak_bytes << " B, blocks " << blocks_parked.peak_bytes
      << " B, both offloaded";
  std::cout << "peak tensor bytes: plain " << plain.peak_bytes << ", levels " << levels.peak_bytes
            << ", levels offloaded " << levels_parked.peak_bytes << ", blocks offloaded "
            << blocks_parked.peak_bytes << "\n";
}

TEST(LevelCheckpoint, WithoutGradModeItIsThePlainForward) {
  UNet model(Model(), 7);
  model->eval();
  torch::NoGradGuard no_grad;
  const torch::Tensor x = torch::randn({1, 4, 32, 32});
  const torch::Tensor plain = model->forward(x)[0];
  for (CheckpointUnit unit : {CheckpointUnit::kLevel, CheckpointUnit::kBlock}) {
    model->encoder->set_checkpointing(unit);
    model->decoder->set_checkpointing(unit);
    EXPECT_TRUE(torch::equal(plain, model->forward(x)[0]));
  }
}

TEST(LevelCheckpoint, UnitsOfTheSettings) {
  EXPECT_EQ(CheckpointUnitOf(Checkpointing::kOff), CheckpointUnit::kNone);
  EXPECT_EQ(CheckpointUnitOf(Checkpointing::kLevels), CheckpointUnit::kLevel);
  EXPECT_EQ(CheckpointUnitOf(RecomputeUnit::kLevel), CheckpointUnit::kLevel);
  EXPECT_EQ(CheckpointUnitOf(Checkpointing::kBlocks), CheckpointUnit::kBlock);
  EXPECT_EQ(CheckpointUnitOf(RecomputeUnit::kBlock), CheckpointUnit::kBlock);
}

}  // namespace
}  // namespace up
