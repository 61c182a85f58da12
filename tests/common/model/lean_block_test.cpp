// model.memory: lean. ConcatConv computes a convolution of a concatenation
// to rounding, with its gradients, while holding less at its backward's
// peak; a lean U-Net (classic and nnU-Net's) trains as the model as written
// does, to rounding, and holds less when its blocks are recomputed.
#include "common/model/lean_block.h"

#include <gtest/gtest.h>

#include "common/config/config_file.h"
#include "common/device/tensor_accounting.h"
#include "common/model/unet.h"
#include "tests/support/one_step.h"

namespace up {
namespace {

// Largest |a - b| over largest |a|: 0 for equal tensors.
double MaxRelativeDifference(const torch::Tensor& a, const torch::Tensor& b) {
  const double scale = a.abs().max().item<double>();
  return (a - b).abs().max().item<double>() / (scale > 0 ? scale : 1.0);
}

struct ConvCase {
  int dims;
  int64_t stride;
  bool bias;
  int64_t size;      // per spatial axis (odd with a stride: output_padding matters)
  int64_t rows = 0;  // the first spatial axis where not `size` (long: the forward runs by slabs)
};

class ConcatConvCases : public ::testing::TestWithParam<ConvCase> {};

TEST_P(ConcatConvCases, EqualsTheConvolutionOfTheConcatenationWithItsGradients) {
  const ConvCase c = GetParam();
  torch::manual_seed(1);
  std::shared_ptr<torch::nn::Module> conv;
  if (c.dims == 2) {
    conv = std::make_shared<torch::nn::Conv2dImpl>(
        torch::nn::Conv2dOptions(5, 4, 3).stride(c.stride).padding(1).bias(c.bias));
  } else {
    conv = std::make_shared<torch::nn::Conv3dImpl>(
        torch::nn::Conv3dOptions(5, 4, 3).stride(c.stride).padding(1).bias(c.bias));
  }
  std::vector<int64_t> a_shape{2, 2}, b_shape{2, 3};
  for (int d = 0; d < c.dims; ++d) {
    const int64_t n = d == 0 && c.rows > 0 ? c.rows : c.size;
    a_shape.push_back(n);
    b_shape.push_back(n);
  }
  const torch::Tensor a0 = torch::randn(a_shape), b0 = torch::randn(b_shape);
  auto run = [&](bool lean, size_t free_first) {
    const torch::Tensor a = a0.clone().requires_grad_(), b = b0.clone().requires_grad_();
    conv->zero_grad();
    torch::Tensor y =
        lean ? ConcatConv(*conv, {a, b}, free_first)
             : (c.dims == 2 ? conv->as<torch::nn::Conv2d>()->forward(torch::cat({a, b}, 1))
                            : conv->as<torch::nn::Conv3d>()->forward(torch::cat({a, b}, 1)));
    torch::manual_seed(2);
    y.backward(torch::randn_like(y));
    std::vector<torch::Tensor> out{y.detach(), a.grad(), b.grad()};
    for (const auto& p : conv->parameters()) out.push_back(p.grad().clone());
    return out;
  };
  const std::vector<torch::Tensor> plain = run(false, 0);
  for (size_t free_first : {0, 1}) {
    const std::vector<torch::Tensor> lean = run(true, free_first);
    ASSERT_EQ(plain.size(), lean.size());
    const char* what[] = {"output", "gradient of a", "gradient of b", "weight gradient",
                          "bias gradient"};
    for (size_t i = 0; i < plain.size(); ++i) {
      ASSERT_EQ(plain[i].sizes(), lean[i].sizes()) << what[i];
      // A weight's gradient sums over every voxel: at 2^21 voxels a part
      // (by slabs) the orders differ by more than an output's few terms.
      const double tolerance = i >= 3 && c.rows > 0 ? 1e-4 : 1e-6;
      EXPECT_LT(MaxRelativeDifference(plain[i], lean[i]), tolerance) << what[i];
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, ConcatConvCases,
                         ::testing::Values(ConvCase{2, 1, false, 8}, ConvCase{2, 1, true, 8},
                                           ConvCase{2, 2, true, 9}, ConvCase{3, 1, false, 6},
                                           ConvCase{3, 2, true, 7},
                                           // by slabs (2^21 elements a part or more):
                                           // 16, 16 and 3 rows, and 2 of 16
                                           ConvCase{2, 1, true, 16384, 35},
                                           ConvCase{3, 1, false, 128, 32},
                                           // long, but strided: whole
                                           ConvCase{2, 2, true, 5, 41}),
                         [](const auto& info) {
                           const ConvCase& c = info.param;
                           return std::to_string(c.dims) + "d_stride" + std::to_string(c.stride) +
                                  (c.bias ? "_bias" : "") + "_size" + std::to_string(c.size) +
                                  (c.rows > 0 ? "_rows" + std::to_string(c.rows) : "");
                         });

// NormAct: the norm module's forward and the activation (the same bits), and
// the gradients of both to rounding, for each norm and activation the
// models use, affine or not; in evaluation it is the module as written.
TEST(NormAct, EqualsTheNormAndTheActivationWithTheirGradients) {
  using torch::nn::AnyModule;
  struct NormCase {
    const char* name;
    AnyModule norm;
    int dims;  // 2, 3, or 5: 3-D at 48^3
  };
  const std::vector<NormCase> norms{
      {"BatchNorm3d", AnyModule(torch::nn::BatchNorm3d(6)), 3},
      {"BatchNorm2d", AnyModule(torch::nn::BatchNorm2d(6)), 2},
      {"InstanceNorm3d affine",
       AnyModule(torch::nn::InstanceNorm3d(torch::nn::InstanceNorm3dOptions(6).affine(true))), 3},
      {"InstanceNorm3d", AnyModule(torch::nn::InstanceNorm3d(6)), 3},
      {"InstanceNorm2d affine",
       AnyModule(torch::nn::InstanceNorm2d(torch::nn::InstanceNorm2dOptions(6).affine(true))), 2},
      {"GroupNorm", AnyModule(torch::nn::GroupNorm(3, 6)), 3},
      // Large enough that the backward takes the channels a few at a time.
      {"BatchNorm3d large", AnyModule(torch::nn::BatchNorm3d(6)), 5},
      {"InstanceNorm3d affine large",
       AnyModule(torch::nn::InstanceNorm3d(torch::nn::InstanceNorm3dOptions(6).affine(true))), 5},
  };
  for (NormCase c : norms) {
    for (const Activation act : {Activation{true, 0.0}, Activation{true, 0.01}, Activation{}}) {
      SCOPED_TRACE(std::string(c.name) +
                   (act.on ? " slope " + std::to_string(act.slope) : " none"));
      torch::manual_seed(4);
      {
        torch::NoGradGuard no_grad;  // an affine norm away from 1 and 0
        for (auto& p : c.norm.ptr()->parameters()) p.add_(0.3 * torch::randn_like(p));
      }
      std::vector<int64_t> shape{3, 6, 5, 7};
      if (c.dims == 3) shape.push_back(4);
      if (c.dims == 5) shape = {2, 6, 48, 48, 48};  // 110592 voxels a channel
      const torch::Tensor x0 = torch::randn(shape);
      auto run = [&](bool lean) {
        const torch::Tensor x = x0.clone().requires_grad_();
        c.norm.ptr()->zero_grad();
        torch::Tensor y;
        if (lean) {
          y = NormAct(*c.norm.ptr(), x * 1.0, act);
        } else {
          y = c.norm.forward(x * 1.0);
          if (act.on) y = act.slope == 0 ? y.relu_() : torch::leaky_relu_(y, act.slope);
        }
        torch::manual_seed(5);
        y.backward(torch::randn_like(y));
        std::vector<torch::Tensor> out{y.detach(), x.grad()};
        for (const auto& p : c.norm.ptr()->parameters()) out.push_back(p.grad().clone());
        return out;
      };
      const std::vector<torch::Tensor> written = run(false), lean = run(true);
      ASSERT_EQ(written.size(), lean.size());
      EXPECT_TRUE(torch::equal(written[0], lean[0])) << "the forward is the module's own";
      // At the activation's kink (a norm output within rounding of 0) the
      // backward's recomputed output can fall on the other side: a few
      // elements in a million take the other slope, and the channel sums
      // they enter move by as much.
      const bool large = c.dims == 5;
      for (size_t i = 1; i < written.size(); ++i) {
        const torch::Tensor off =
            (written[i] - lean[i]).abs() > 1e-5 * written[i].abs().max().item<double>();
        if (!large) {
          EXPECT_EQ(off.sum().item<int64_t>(), 0) << "gradient " << i;
        } else if (i == 1) {
          EXPECT_LE(off.sum().item<int64_t>() * 100000, off.numel()) << "gradient of x";
        } else {
          const double l2 = ((written[i] - lean[i]).norm() / written[i].norm()).item<double>();
          EXPECT_LT(l2, 1e-3) << "gradient " << i;
        }
      }
    }
  }
  torch::nn::BatchNorm2d bn(4);
  bn->eval();
  const torch::Tensor x = torch::randn({2, 4, 3, 3}).requires_grad_();
  EXPECT_TRUE(torch::equal(NormAct(*bn, x, Activation{true, 0.0}), bn->forward(x).relu()));
}

// Its graph is for one backward: a second one is an error that says so, not
// a wrong gradient.
TEST(ConcatConv, SecondBackwardIsAnError) {
  torch::nn::Conv2d conv(torch::nn::Conv2dOptions(4, 2, 3).padding(1));
  const torch::Tensor a = torch::randn({1, 2, 5, 5}).requires_grad_();
  const torch::Tensor b = torch::randn({1, 2, 5, 5}).requires_grad_();
  torch::Tensor y = ConcatConv(*conv, {a, b}, 1).sum();
  y.backward({}, /*retain_graph=*/true);
  try {
    y.backward();
    FAIL() << "a second backward ran";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("ran twice"), std::string::npos) << e.what();
  }
}

TEST(ConcatConv, NotAConvolutionIsRefused) {
  torch::nn::Linear linear(4, 2);
  EXPECT_THROW(ConcatConv(*linear, {torch::randn({1, 4})}, 0), std::invalid_argument);
  torch::nn::Conv2d conv(torch::nn::Conv2dOptions(4, 2, 3));
  EXPECT_THROW(ConcatConv(*conv, {torch::randn({1, 4, 5, 5})}, 1), std::invalid_argument);
}

// The backward of a decoder level's first convolution, as a recomputed
// block holds it: the skip (held by its maker), the upsampled tensor
// (held by nothing else) and the gradient entering. As written, the graph
// saves the concatenation (both widths) and makes its gradient (both again);
// lean saves only the parts and lets the upsampled one go between its
// weight gradient and its input gradient.
TEST(ConcatConv, HoldsLessAtTheBackwardsPeak) {
  InstallTensorAccounting();
  const torch::Device cpu(torch::kCPU);
  torch::nn::Conv3d conv(torch::nn::Conv3dOptions(16, 8, 3).padding(1).bias(false));
  const torch::Tensor skip = torch::randn({1, 8, 24, 24, 24}).requires_grad_();
  const int64_t part = skip.numel() * 4;  // bytes of one 8-channel tensor
  auto peak = [&](bool lean) {
    skip.mutable_grad() = torch::Tensor();
    torch::Tensor up = torch::randn({1, 8, 24, 24, 24}).requires_grad_();
    torch::Tensor y = lean ? ConcatConv(*conv, {skip, up}, 1)
                           : conv->forward(torch::cat({skip, up}, 1));  // (1, 8, 24^3)
    torch::Tensor g = torch::randn_like(y);
    up = torch::Tensor();  // the graph holds it now (lean) or its concatenation (as written)
    const int64_t before = TensorBytesOn(cpu).live;
    ResetPeakTensorBytes(cpu);
    y.backward(g);
    return TensorBytesOn(cpu).peak - before;
  };
  const int64_t written = peak(false), lean = peak(true);
  std::cout << "ConcatConv backward peak above the start: as written " << written / part
            << " parts, lean " << lean / part << " parts (" << part << " B a part)\n";
  EXPECT_LE(lean + part, written) << "as written " << written << " B, lean " << lean << " B";
}

// The forward (and a block's rebuild inside a checkpointed backward) holds
// the output and one slab's convolution at once, where taking each part
// whole held the output and a part's convolution (the kernel's copy of the
// part in its own layout, its output).
TEST(ConcatConv, ForwardHoldsTheOutputAndOneSlab) {
  InstallTensorAccounting();
  const torch::Device cpu(torch::kCPU);
  // 2^21 elements a part: large enough to go by slabs.
  torch::nn::Conv3d conv(torch::nn::Conv3dOptions(64, 32, 3).padding(1).bias(false));
  const torch::Tensor skip = torch::randn({1, 32, 64, 32, 32}).requires_grad_();
  const torch::Tensor up = torch::randn({1, 32, 64, 32, 32}).requires_grad_();
  const int64_t part = skip.numel() * 4;  // bytes of one 32-channel tensor, and of the output
  const int64_t before = TensorBytesOn(cpu).live;
  ResetPeakTensorBytes(cpu);
  const torch::Tensor y = ConcatConv(*conv, {skip, up}, 1);  // (1, 32, 64, 32, 32)
  const int64_t peak = TensorBytesOn(cpu).peak - before;
  std::cout << "ConcatConv forward peak above its inputs: " << static_cast<double>(peak) / part
            << " parts (" << part << " B a part)\n";
  // The output, and a slab of 16 rows and its halo (18 of 64) a few times
  // over (its contiguous copy, the kernel's, its output); a part taken
  // whole held two parts and the kernel's copy (about 3).
  EXPECT_LT(peak, 2 * part);
  EXPECT_TRUE(torch::allclose(y, conv->forward(torch::cat({skip, up}, 1)), 1e-5, 1e-5));
}

// Upsample: a U-Net's upsampling (kernel = stride) a slab at a time, the
// same bits as the module with the same gradients, holding at least half an
// output less than the module's two (the kernel's and its copy); any other transposed
// convolution is the module's own forward.
TEST(Upsample, EqualsTheModuleBitForBitAndHoldsLess) {
  InstallTensorAccounting();
  const torch::Device cpu(torch::kCPU);
  torch::manual_seed(3);
  struct Case {
    const char* name;
    torch::nn::AnyModule up;
    std::vector<int64_t> x;
    bool slabs;  // the output is large enough to go by slabs
  };
  std::vector<Case> cases;
  cases.push_back({"3-D, 2^21 outputs",
                   torch::nn::AnyModule(torch::nn::ConvTranspose3d(
                       torch::nn::ConvTranspose3dOptions(16, 8, 2).stride(2))),
                   {1, 16, 32, 32, 32},
                   true});
  cases.push_back({"2-D, anisotropic stride, no bias",
                   torch::nn::AnyModule(torch::nn::ConvTranspose2d(
                       torch::nn::ConvTranspose2dOptions(4, 2, {2, 1}).stride({2, 1}).bias(false))),
                   {2, 4, 256, 2048},
                   true});
  cases.push_back({"3-D, kernel 3 (not an upsampling)",
                   torch::nn::AnyModule(torch::nn::ConvTranspose3d(
                       torch::nn::ConvTranspose3dOptions(4, 4, 3).stride(2))),
                   {1, 4, 8, 8, 8},
                   false});
  for (Case& c : cases) {
    const torch::Tensor x0 = torch::randn(c.x);
    auto run = [&](bool lean) {
      const torch::Tensor x = x0.clone().requires_grad_();
      c.up.ptr()->zero_grad();
      const int64_t before = TensorBytesOn(cpu).live;
      ResetPeakTensorBytes(cpu);
      torch::Tensor y = lean ? Upsample(c.up, x) : c.up.forward(x);
      const int64_t peak = TensorBytesOn(cpu).peak - before;
      torch::manual_seed(4);
      y.backward(torch::randn_like(y));
      std::vector<torch::Tensor> out{y.detach(), x.grad()};
      for (const auto& p : c.up.ptr()->parameters()) out.push_back(p.grad().clone());
      return std::make_pair(out, peak);
    };
    const auto [plain, plain_peak] = run(false);
    const auto [lean, lean_peak] = run(true);
    for (size_t i = 0; i < plain.size(); ++i)
      EXPECT_TRUE(torch::equal(plain[i], lean[i])) << c.name << ", tensor " << i;
    const int64_t output = plain[0].numel() * 4;
    std::cout << c.name << ": forward peak " << static_cast<double>(plain_peak) / output
              << " outputs as the module, " << static_cast<double>(lean_peak) / output
              << " by Upsample\n";
    if (c.slabs) {
      EXPECT_LE(lean_peak + output / 2, plain_peak) << c.name;
    }
  }
}

// A whole U-Net: lean trains as written does, to rounding (one SGD step's
// weights), and recomputed by blocks, with the inputs offloaded, holds less.
struct LeanStepResult {
  std::vector<torch::Tensor> weights;  // after one SGD step
  int64_t peak_bytes = 0;
};

// One SGD step of the model with its blocks recomputed and offloaded.
LeanStepResult TrainOneLeanStep(const ModelConfig& m, std::vector<int64_t> shape,
                                bool deep_supervision) {
  UNet model(m, 5, deep_supervision);
  {
    torch::NoGradGuard no_grad;  // away from nnU-Net's zeroed residual norms
    torch::manual_seed(11);
    for (auto& p : model->parameters()) p.add_(0.05 * torch::randn_like(p));
  }
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.1));
  const test::OneStep one = test::ForwardBackward(model, CheckpointUnit::kBlock, Precision::kFp32,
                                                  shape, m.num_classes, /*offload=*/true);
  LeanStepResult s;
  s.peak_bytes = one.peak_bytes;
  sgd.step();
  for (const auto& p : model->parameters()) s.weights.push_back(p.detach().clone());
  return s;
}

// `strictly`: the decoder's first block is the peak, so lean must hold
// less; otherwise (tiny nnU-Net plans, whose peak is elsewhere) no more.
void ExpectLeanTrainsAsWritten(ModelConfig m, const std::vector<int64_t>& shape,
                               bool deep_supervision, bool strictly) {
  m.memory = ModelMemory::kDefault;
  const LeanStepResult written = TrainOneLeanStep(m, shape, deep_supervision);
  m.memory = ModelMemory::kLean;
  const LeanStepResult lean = TrainOneLeanStep(m, shape, deep_supervision);
  ASSERT_EQ(written.weights.size(), lean.weights.size()) << "the same parameters";
  double worst = 0;
  for (size_t i = 0; i < written.weights.size(); ++i)
    worst = std::max(worst, MaxRelativeDifference(written.weights[i], lean.weights[i]));
  EXPECT_LT(worst, 1e-6) << "weights after one step differ by " << worst << " relative";
  EXPECT_LE(lean.peak_bytes, written.peak_bytes - (strictly ? 1 : 0))
      << "as written " << written.peak_bytes << " B, lean " << lean.peak_bytes << " B";
  std::cout << "one step, blocks recomputed and offloaded: peak " << written.peak_bytes
            << " B as written, " << lean.peak_bytes << " B lean; weights within " << worst
            << " relative\n";
}

TEST(LeanUNet, ClassicTrainsAsWrittenToRoundingAndHoldsLess) {
  InstallTensorAccounting();
  ModelConfig m;
  m.dims = 3;
  m.features = {8, 16};
  m.norm = Norm::kInstance;
  m.in_channels = 2;
  ExpectLeanTrainsAsWritten(m, {1, 2, 32, 32, 32}, false, /*strictly=*/true);
}

TEST(LeanUNet, NnunetTrainsAsWrittenToRoundingAndHoldsNoMore) {
  InstallTensorAccounting();
  for (const char* configuration : {"3d_fullres", "2d_res"}) {
    SCOPED_TRACE(configuration);
    const Config config = LoadConfigFromString(
        "{}", "test",
        {"model.kind=nnunet",
         std::string("model.plans=") + UP_SOURCE_DIR + "/configs/nnunet/tiny_plans.json",
         std::string("model.configuration=") + configuration, "model.in_channels=2",
         "model.num_classes=3", "model.memory=lean"});
    std::vector<int64_t> shape{2, 2};
    for (int s : config.data.size) shape.push_back(s);
    ExpectLeanTrainsAsWritten(config.model, shape, true, /*strictly=*/false);
  }
}

}  // namespace
}  // namespace up
