// Sliding-window prediction: window positions as MONAI places them, the
// Gaussian importance map, and blending that reproduces a network that does
// not depend on where the window is (padding, several windows, batches and
// mirroring all give the whole image's logits back).
#include "common/model/sliding_window.h"

#include <gtest/gtest.h>

namespace up {
namespace {

TEST(WindowStarts, CoversTheAxisWithTheLastWindowEndingAtIt) {
  EXPECT_EQ(WindowStarts(32, 32, 0.5), (std::vector<int64_t>{0}));
  EXPECT_EQ(WindowStarts(20, 32, 0.5), (std::vector<int64_t>{0}));
  EXPECT_EQ(WindowStarts(40, 32, 0.5), (std::vector<int64_t>{0, 8}));
  EXPECT_EQ(WindowStarts(100, 32, 0.5), (std::vector<int64_t>{0, 16, 32, 48, 64, 68}));
  EXPECT_EQ(WindowStarts(64, 32, 0.0), (std::vector<int64_t>{0, 32}));
  EXPECT_EQ(WindowStarts(65, 32, 0.0), (std::vector<int64_t>{0, 32, 33}));
  // A step that would round to 0 is 1.
  EXPECT_EQ(WindowStarts(7, 4, 0.9), (std::vector<int64_t>{0, 1, 2, 3}));
}

TEST(WindowStarts, CountMultipliesOverAxesAndPaddedAxesHaveOne) {
  SlidingWindowOptions o;
  o.window = {32, 32, 16};
  EXPECT_EQ(WindowCount({40, 100, 10}, o), 2 * 6 * 1);
}

TEST(ImportanceMap, GaussianPeaksAtTheCentreAndNeverFallsBelowTheFloor) {
  const torch::Tensor m = ImportanceMap({9, 6}, true, 0.125, torch::kCPU);
  ASSERT_EQ(m.sizes(), (std::vector<int64_t>{9, 6}));
  EXPECT_EQ(m.argmax().item<int64_t>() / 6, 4);
  EXPECT_TRUE(torch::equal(m, m.flip({0})));
  EXPECT_TRUE(torch::equal(m, m.flip({1})));
  EXPECT_GE(m.min().item<float>(), 1e-3f);
  EXPECT_FLOAT_EQ(m.max().item<float>(), std::exp(-0.25f / (2 * 0.75f * 0.75f)));  // (0, +-0.5)
  EXPECT_TRUE(torch::equal(ImportanceMap({3, 4}, false, 0.125, torch::kCPU), torch::ones({3, 4})));
}

// A 1x1 convolution: each voxel's logits depend on that voxel only, so any
// blend of windows must give back the whole image's logits.
WindowNet Pointwise(int64_t in, int64_t out) {
  torch::manual_seed(3);
  const torch::Tensor w = torch::randn({out, in});  // (K, C)
  return [w](const torch::Tensor& x) { return torch::einsum("kc,nc...->nk...", {w, x}); };
}

TEST(SlidingWindowLogits, PointwiseNetworkComesBackWholeIn2dAnd3d) {
  for (const std::vector<int64_t>& shape :
       {std::vector<int64_t>{1, 2, 40, 23}, std::vector<int64_t>{1, 2, 20, 37, 9}}) {
    const int dims = static_cast<int>(shape.size()) - 2;
    const WindowNet net = Pointwise(2, 3);
    const torch::Tensor image = torch::randn(shape);
    const torch::Tensor whole = net(image);
    for (int batch : {1, 3}) {
      for (bool mirror : {false, true}) {
        SlidingWindowOptions o;
        o.window = std::vector<int64_t>(static_cast<size_t>(dims), 16);
        o.batch = batch;
        o.mirror = mirror;
        const torch::Tensor out = SlidingWindowLogits(net, image, o, torch::kCPU);
        ASSERT_EQ(out.sizes(), whole.sizes());
        EXPECT_TRUE(torch::allclose(out, whole, 1e-5, 1e-5))
            << "dims " << dims << " batch " << batch << " mirror " << mirror << ": max diff "
            << (out - whole).abs().max().item<double>();
      }
    }
  }
}

TEST(SlidingWindowLogits, MirroringAveragesEveryFlip) {
  // Logits = input x position along the last axis: not flip-equivariant, so
  // the mean over flips is input x the mean position, (w - 1) / 2.
  const WindowNet ramp = [](const torch::Tensor& x) {
    return x * torch::arange(x.size(-1), x.options());
  };
  const torch::Tensor image = torch::randn({1, 1, 8, 8});
  SlidingWindowOptions o;
  o.window = {8, 8};
  o.mirror = true;
  const torch::Tensor out = SlidingWindowLogits(ramp, image, o, torch::kCPU);
  EXPECT_TRUE(torch::allclose(out, image * 3.5, 1e-5, 1e-5));
  o.mirror = false;
  EXPECT_TRUE(torch::allclose(SlidingWindowLogits(ramp, image, o, torch::kCPU), ramp(image)));
}

TEST(SlidingWindowLogits, WindowsSeeOnlyTheirPartAndBatchTogether) {
  std::vector<int64_t> batches;
  const WindowNet record = [&batches](const torch::Tensor& x) {
    batches.push_back(x.size(0));
    EXPECT_EQ(x.size(2), 16);
    EXPECT_EQ(x.size(3), 16);
    return x;
  };
  SlidingWindowOptions o;
  o.window = {16, 16};
  o.batch = 4;
  const torch::Tensor image = torch::randn({1, 1, 40, 24});  // 4 x 2 windows at overlap 0.5
  const torch::Tensor out = SlidingWindowLogits(record, image, o, torch::kCPU);
  EXPECT_EQ(batches, (std::vector<int64_t>{4, 4}));
  EXPECT_TRUE(torch::allclose(out, image, 1e-6, 1e-6));
}

// What validation does across two processes: the windows cut in batches
// filled with zero windows, the logits blended where they arrive, the filler
// rows ignored; the same as the one-call function.
TEST(SlidingWindow, CutAndBlendApartEqualsTheWholeFunction) {
  const WindowNet net = [](const torch::Tensor& x) { return torch::cat({x, 2 * x}, 1); };
  SlidingWindowOptions o;
  o.window = {16, 16};
  o.batch = 3;
  const torch::Tensor image = torch::randn({1, 1, 40, 12});  // 4 windows, axis 1 padded
  const torch::Tensor whole = SlidingWindowLogits(net, image, o, torch::kCPU);
  SlidingWindow sw({40, 12}, o);
  ASSERT_EQ(sw.size(), 4);
  const torch::Tensor padded = sw.Pad(image);
  EXPECT_EQ(padded.sizes(), (std::vector<int64_t>{1, 1, 40, 16}));
  for (int64_t first = 0; first < sw.size(); first += 3) {
    const int64_t count = std::min<int64_t>(3, sw.size() - first);
    const torch::Tensor windows = sw.Windows(padded, first, count, 3);  // (3, 1, 16, 16)
    ASSERT_EQ(windows.size(0), 3);
    if (count < 3) {
      EXPECT_EQ(windows.narrow(0, count, 3 - count).abs().sum().item<float>(), 0);
    }
    sw.Blend(first, count, net(windows) + (torch::arange(3).view({3, 1, 1, 1}) >= count) * 1e6);
  }
  EXPECT_TRUE(torch::equal(sw.Result(), whole));
  EXPECT_TRUE(torch::allclose(whole, torch::cat({image, 2 * image}, 1), 1e-6, 1e-6));
}

// A 2-D network over a volume (nnU-Net's 2d configuration): the 2-D window
// slides over each slice, which is the 2-D prediction of every slice, and
// the network sees 2-D windows only.
TEST(SlidingWindowLogits, TwoDWindowOverAVolumeGoesSliceBySlice) {
  torch::manual_seed(4);
  const torch::Tensor w = torch::randn({3, 2, 3, 3});
  const WindowNet conv = [w](const torch::Tensor& x) {  // position-dependent near borders
    EXPECT_EQ(x.dim(), 4);
    return torch::conv2d(x, w, {}, 1, 1);
  };
  SlidingWindowOptions o;
  o.window = {16, 16};
  o.batch = 3;
  o.mirror = true;
  const torch::Tensor volume = torch::randn({1, 2, 5, 40, 12});  // (1, C, D, H, W)
  EXPECT_EQ(WindowCount({5, 40, 12}, o), 5 * 4);
  const torch::Tensor out = SlidingWindowLogits(conv, volume, o, torch::kCPU);
  ASSERT_EQ(out.sizes(), (std::vector<int64_t>{1, 3, 5, 40, 12}));
  for (int64_t z = 0; z < 5; ++z) {
    const torch::Tensor slice = volume.select(2, z);  // (1, C, H, W)
    EXPECT_TRUE(torch::allclose(out.select(2, z), SlidingWindowLogits(conv, slice, o, torch::kCPU),
                                1e-6, 1e-6))
        << "slice " << z;
  }
}

TEST(SlidingWindowLogits, RefusesAWindowOfAnotherRank) {
  SlidingWindowOptions o;
  o.window = {16, 16, 16};
  EXPECT_THROW(SlidingWindowLogits([](const torch::Tensor& x) { return x; },
                                   torch::zeros({1, 1, 16, 16}), o, torch::kCPU),
               std::invalid_argument);
}

}  // namespace
}  // namespace up
