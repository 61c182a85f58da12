// Patches from whole cases: the draw is a function of (seed, position)
// alone, foreground oversampling centres the patch on a foreground voxel,
// small cases are padded, the spatial augmentations move image and mask
// together, and each intensity augmentation does what nnU-Net's does.
#include "common/data/patch_sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "common/data/augment.h"

namespace up {
namespace {

Config Cfg(std::vector<int> size, std::vector<std::string> augment, double fg = 0.33) {
  Config c;
  c.model.dims = static_cast<int>(size.size());
  c.data.size = std::move(size);
  c.data.augment = std::move(augment);
  c.data.foreground_fraction = fg;
  c.train.seed = 11;
  return c;
}

bool SameDraw(const PatchDraw& a, const PatchDraw& b) {
  return a.foreground == b.foreground && a.class_u == b.class_u && a.voxel_u == b.voxel_u &&
         a.place_u == b.place_u && a.scale == b.scale && a.rot90 == b.rot90 && a.flip == b.flip &&
         a.noise_sigma == b.noise_sigma && a.noise_seed == b.noise_seed &&
         a.brightness == b.brightness && a.contrast == b.contrast && a.gamma == b.gamma &&
         a.rotation == b.rotation && a.blur == b.blur && a.blur_seed == b.blur_seed &&
         a.lowres == b.lowres && a.lowres_seed == b.lowres_seed &&
         a.gamma_inverted == b.gamma_inverted;
}

TEST(DrawPatch, DependsOnSeedAndPositionOnly) {
  const Config c = Cfg({16, 16, 16}, AugmentationNames());
  EXPECT_TRUE(SameDraw(DrawPatch(c, 5), DrawPatch(c, 5)));
  EXPECT_FALSE(SameDraw(DrawPatch(c, 5), DrawPatch(c, 6)));
  Config other = c;
  other.train.seed = 12;
  EXPECT_FALSE(SameDraw(DrawPatch(c, 5), DrawPatch(other, 5)));
  // Turning one augmentation off leaves the others' draws alone.
  Config no_noise =
      Cfg({16, 16, 16}, {"scale", "rot90", "mirror", "brightness", "contrast", "gamma"});
  for (int64_t p = 0; p < 50; ++p) {
    const PatchDraw a = DrawPatch(c, p), b = DrawPatch(no_noise, p);
    EXPECT_EQ(a.flip, b.flip);
    EXPECT_EQ(a.place_u, b.place_u);
    EXPECT_EQ(a.gamma, b.gamma);
    EXPECT_EQ(b.noise_sigma, 0);
  }
}

TEST(DrawPatch, ForegroundShareAndAugmentationRatesAreNnunets) {
  const Config c = Cfg({16, 16, 16}, AugmentationNames());
  int fg = 0, scaled = 0, noisy = 0, gamma = 0, flipped = 0, rotated = 0;
  const int n = 4000;
  for (int64_t p = 0; p < n; ++p) {
    const PatchDraw d = DrawPatch(c, p);
    fg += d.foreground;
    scaled += d.scale != 1;
    noisy += d.noise_sigma > 0;
    gamma += d.gamma != 1;
    flipped += d.flip[0];
    rotated += d.rot90 != 0;
    EXPECT_TRUE(d.scale == 1 || (d.scale >= 0.7 && d.scale < 1.4)) << d.scale;
    EXPECT_TRUE(d.gamma == 1 || (d.gamma >= 0.7 && d.gamma < 1.5)) << d.gamma;
    EXPECT_LE(d.noise_sigma, std::sqrt(0.1));
  }
  EXPECT_NEAR(fg / double(n), 0.33, 0.03);
  EXPECT_NEAR(scaled / double(n), 0.2, 0.03);
  EXPECT_NEAR(noisy / double(n), 0.1, 0.02);
  EXPECT_NEAR(gamma / double(n), 0.3, 0.03);
  EXPECT_NEAR(flipped / double(n), 0.5, 0.03);
  EXPECT_NEAR(rotated / double(n), 0.75, 0.03);
  // nnU-Net's later ones: rotation 0.2 (up to 30 degrees about each axis of
  // an isotropic 3-D patch), blur 0.2, low resolution 0.25, inverted gamma 0.1.
  int turned = 0, blurred = 0, low = 0, inverted = 0;
  for (int64_t p = 0; p < n; ++p) {
    const PatchDraw d = DrawPatch(c, p);
    if (!d.rotation.empty()) {
      ++turned;
      ASSERT_EQ(d.rotation.size(), 3u);
      for (double a : d.rotation) EXPECT_LE(std::abs(a), M_PI / 6 + 1e-12);
    }
    blurred += d.blur;
    low += d.lowres;
    inverted += d.gamma_inverted != 1;
  }
  EXPECT_NEAR(turned / double(n), 0.2, 0.03);
  EXPECT_NEAR(blurred / double(n), 0.2, 0.03);
  EXPECT_NEAR(low / double(n), 0.25, 0.03);
  EXPECT_NEAR(inverted / double(n), 0.1, 0.02);
  // 2-D square and anisotropic 3-D (nnU-Net's dummy 2-D): one in-plane
  // angle up to 180 degrees; a 2-D patch over 1.5x longer one way: 15.
  double widest = 0;
  for (int64_t p = 0; p < 400; ++p) {
    const PatchDraw flat = DrawPatch(Cfg({8, 40, 40}, AugmentationNames()), p);
    EXPECT_TRUE(flat.in_plane);
    if (!flat.rotation.empty()) {
      ASSERT_EQ(flat.rotation.size(), 1u);
      widest = std::max(widest, std::abs(flat.rotation[0]));
    }
    const PatchDraw narrow = DrawPatch(Cfg({16, 32}, {"rotate"}), p);
    if (!narrow.rotation.empty()) {
      EXPECT_LE(std::abs(narrow.rotation[0]), M_PI / 12 + 1e-12);
    }
  }
  EXPECT_GT(widest, M_PI / 2);
  EXPECT_FALSE(DrawPatch(Cfg({16, 16, 16}, {}), 0).in_plane);
  // None and all; no rotation where the plane is not square.
  EXPECT_FALSE(DrawPatch(Cfg({16, 16}, {}, 0.0), 3).foreground);
  EXPECT_TRUE(DrawPatch(Cfg({16, 16}, {}, 1.0), 3).foreground);
  for (int64_t p = 0; p < 40; ++p) EXPECT_EQ(DrawPatch(Cfg({16, 16, 8}, {"rot90"}), p).rot90, 0);
}

TEST(PatchOrigin, ForegroundPatchesHoldTheirVoxelAndStayInside) {
  torch::Tensor mask = torch::zeros({40, 30, 20}, torch::kInt64);  // (D, H, W)
  mask[3][17][19] = 2;
  const std::vector<int> patch{16, 16, 16};
  PatchDraw d;
  d.foreground = true;
  d.place_u = {0.5, 0.5, 0.5};
  const std::vector<int64_t> o = PatchOrigin(d, {torch::Tensor(), mask, {}}, patch);
  // Centred on the voxel where the case allows: z would start at -5, kept at 0;
  // y at 9; x would end past 20, kept at 4 (20 - 16).
  EXPECT_EQ(o, (std::vector<int64_t>{0, 9, 4}));
  const Sample s = CutPatch({torch::Tensor(), mask, {}}, d, patch);
  EXPECT_EQ(s.mask.sum().item<int64_t>(), 2);
  // No foreground in the case: a random place instead.
  d.place_u = {0.0, 0.999, 0.5};
  EXPECT_EQ(PatchOrigin(d, {torch::Tensor(), torch::zeros({40, 30, 20}, torch::kInt64), {}}, patch),
            (std::vector<int64_t>{0, 14, 2}));
}

TEST(PatchOrigin, PicksAmongThePresentClassesAndTheirVoxels) {
  torch::Tensor mask = torch::zeros({64, 64}, torch::kInt64);
  mask.narrow(0, 0, 2).narrow(1, 0, 2).fill_(1);    // class 1, top left
  mask.narrow(0, 60, 4).narrow(1, 60, 4).fill_(3);  // class 3, bottom right
  PatchDraw d;
  d.foreground = true;
  d.place_u = {0, 0};
  d.class_u = 0.2;  // the first of {1, 3}
  EXPECT_EQ(PatchOrigin(d, {torch::Tensor(), mask, {}}, {8, 8}), (std::vector<int64_t>{0, 0}));
  d.class_u = 0.7;  // class 3
  d.voxel_u = 0.0;  // its first voxel (60, 60): the patch ends at the border
  EXPECT_EQ(PatchOrigin(d, {torch::Tensor(), mask, {}}, {8, 8}), (std::vector<int64_t>{56, 56}));
  // The same from class locations alone (the encoder of a cache reads no mask).
  Sample located{
      torch::zeros({1, 64, 64}), torch::Tensor(), {{}, {0, 1, 64, 65}, {}, {60 * 64 + 60}}};
  EXPECT_EQ(PatchOrigin(d, located, {8, 8}), (std::vector<int64_t>{56, 56}));
  d.class_u = 0.2;
  EXPECT_EQ(PatchOrigin(d, located, {8, 8}), (std::vector<int64_t>{0, 0}));
}

TEST(CutPatch, PadsACaseSmallerThanThePatchAroundItsMiddle) {
  const torch::Tensor image = torch::ones({2, 6, 10});  // (C, H, W)
  const torch::Tensor mask = torch::ones({6, 10}, torch::kInt64);
  PatchDraw d;
  d.place_u = {0.0, 0.0};
  d.flip = {false, false};
  const Sample s = CutPatch({image, mask, {}}, d, {8, 8});
  ASSERT_EQ(s.image.sizes(), (std::vector<int64_t>{2, 8, 8}));
  // Rows 0 and 7 are padding; columns all from the case.
  EXPECT_EQ(s.image.select(1, 0).sum().item<float>(), 0);
  EXPECT_EQ(s.image.select(1, 7).sum().item<float>(), 0);
  EXPECT_EQ(s.mask.sum().item<int64_t>(), 6 * 8);
}

TEST(CutPatch, WithoutAugmentationIsAPlainCrop) {
  torch::manual_seed(1);
  const torch::Tensor image = torch::randn({3, 20, 24});
  const torch::Tensor mask = torch::randint(0, 3, {20, 24}, torch::kInt64);
  const Config c = Cfg({8, 16}, {}, 0.0);
  for (int64_t p = 0; p < 10; ++p) {
    const PatchDraw d = DrawPatch(c, p);
    const std::vector<int64_t> o = PatchOrigin(d, {image, mask, {}}, c.data.size);
    const Sample s = CutPatch({image, mask, {}}, d, c.data.size);
    EXPECT_TRUE(torch::equal(s.image, image.narrow(1, o[0], 8).narrow(2, o[1], 16)));
    EXPECT_TRUE(torch::equal(s.mask, mask.narrow(0, o[0], 8).narrow(1, o[1], 16)));
  }
}

// nnU-Net's 2d configuration on volumes: a 2-D patch of a 3-D case is a
// patch one slice deep, placed as any, then cut as a 2-D case; the encoder
// (image and class locations) and the decoder (mask) cut the same one.
TEST(CutPatch, TwoDPatchOfAVolumeIsOneSliceCutAsAnImage) {
  torch::manual_seed(2);
  const torch::Tensor image = torch::randn({2, 9, 20, 24});  // (C, D, H, W)
  torch::Tensor mask = torch::zeros({9, 20, 24}, torch::kInt64);
  mask[6][3][20] = 1;
  const std::vector<std::vector<int64_t>> locations{{}, {(6 * 20 + 3) * 24 + 20}};
  const Config c = Cfg({8, 16}, {}, 0.0);
  std::set<int64_t> slices;
  for (int64_t p = 0; p < 40; ++p) {
    const PatchDraw d = DrawPatch(c, p);
    const Sample s = CutPatch({image, mask, locations}, d, c.data.size);
    ASSERT_EQ(s.image.sizes(), (std::vector<int64_t>{2, 8, 16}));
    ASSERT_EQ(s.mask.sizes(), (std::vector<int64_t>{8, 16}));
    // Some slice of the case, at the place a 2-D case of that slice gets.
    const int64_t z = std::min<int64_t>(static_cast<int64_t>(d.slice_u * 9), 8);
    slices.insert(z);
    const std::vector<int64_t> o = PatchOrigin(d, {image[0][z], mask[z], {}}, c.data.size);
    EXPECT_TRUE(torch::equal(s.image, image.select(1, z).narrow(1, o[0], 8).narrow(2, o[1], 16)));
    EXPECT_TRUE(torch::equal(s.mask, mask[z].narrow(0, o[0], 8).narrow(1, o[1], 16)));
    EXPECT_TRUE(
        torch::equal(CutPatch({torch::Tensor(), mask, locations}, d, c.data.size).mask, s.mask));
  }
  EXPECT_GT(slices.size(), 4u);  // the slice is drawn, not fixed
  // A foreground draw: the slice of the chosen voxel, the patch around it,
  // the same from the class locations alone (the encoder reads no mask).
  PatchDraw d = DrawPatch(c, 0);
  d.foreground = true;
  for (const Sample& whole :
       {Sample{image, mask, locations}, Sample{image, torch::Tensor(), locations}}) {
    const Sample s = CutPatch(whole, d, c.data.size);
    EXPECT_TRUE(torch::equal(s.image, image.select(1, 6).narrow(1, 0, 8).narrow(2, 8, 16)));
  }
  EXPECT_EQ(CutPatch({torch::Tensor(), mask, {}}, d, c.data.size).mask.sum().item<int64_t>(), 1);
  // Augmented, the encoder's image and the decoder's mask still agree.
  const Config aug = Cfg({8, 16}, AugmentationNames(), 0.33);
  for (int64_t p = 0; p < 20; ++p) {
    const PatchDraw a = DrawPatch(aug, p);
    const Sample both = CutPatch({image, mask, locations}, a, aug.data.size);
    EXPECT_TRUE(torch::equal(
        both.image, CutPatch({image, torch::Tensor(), locations}, a, aug.data.size).image));
    EXPECT_TRUE(torch::equal(both.mask,
                             CutPatch({torch::Tensor(), mask, locations}, a, aug.data.size).mask));
  }
}

TEST(CutPatch, SpatialAugmentationMovesImageAndMaskTogether) {
  // Channel 0 of the image is the mask itself: rotations and flips must keep it so.
  const torch::Tensor mask = torch::randint(0, 4, {24, 24, 24}, torch::kInt64);
  const torch::Tensor image = torch::stack({mask.to(torch::kFloat32), torch::rand({24, 24, 24})});
  const Config c = Cfg({16, 16, 16}, {"rot90", "mirror"});
  int rotated = 0;
  for (int64_t p = 0; p < 20; ++p) {
    const PatchDraw d = DrawPatch(c, p);
    rotated += d.rot90 != 0;
    const Sample s = CutPatch({image, mask, {}}, d, c.data.size);
    EXPECT_TRUE(torch::equal(s.image[0], s.mask.to(torch::kFloat32))) << "position " << p;
    // The decoder cuts its mask without the image: the same mask.
    EXPECT_TRUE(torch::equal(CutPatch({torch::Tensor(), mask, {}}, d, c.data.size).mask, s.mask));
  }
  EXPECT_GT(rotated, 0);
  // Scaling resamples a region of another size to the patch.
  PatchDraw zoom = DrawPatch(Cfg({16, 16, 16}, {}, 0.0), 0);
  zoom.scale = 1.3;
  const Sample z = CutPatch({image, mask, {}}, zoom, {16, 16, 16});
  EXPECT_EQ(z.image.sizes(), (std::vector<int64_t>{2, 16, 16, 16}));
  EXPECT_EQ(z.mask.sizes(), (std::vector<int64_t>{16, 16, 16}));
  EXPECT_LE(z.mask.max().item<int64_t>(), 3);
}

// Rotation resamples the case around the patch centre: a quarter turn is a
// quarter turn of the plain cut (voxel centres land on voxel centres), the
// mask moving with the image; in 3-D about axis 2 it turns the plane of axes
// 0 and 1; scale and rotation compose as batchgeneratorsv2's R S.
TEST(CutPatch, RotationTurnsImageAndMaskAboutThePatchCentre) {
  torch::manual_seed(3);
  const torch::Tensor image = torch::randn({2, 21, 21});
  const torch::Tensor mask = torch::randint(0, 4, {21, 21}, torch::kInt64);
  PatchDraw d = DrawPatch(Cfg({11, 11}, {}, 0.0), 4);
  const Sample plain = CutPatch({image, mask, {}}, d, {11, 11});
  d.rotation = {M_PI / 2};
  const Sample turned = CutPatch({image, mask, {}}, d, {11, 11});
  // Patch voxel p reads the case at R p: out(p0, p1) = plain(-p1, p0).
  EXPECT_TRUE(torch::allclose(turned.image, torch::rot90(plain.image, 3, {1, 2}), 1e-5, 1e-5));
  EXPECT_TRUE(torch::equal(turned.mask, torch::rot90(plain.mask, 3, {0, 1})));

  const torch::Tensor cube = torch::randn({1, 15, 15, 15});
  PatchDraw e = DrawPatch(Cfg({9, 9, 9}, {}, 0.0), 1);
  const Sample flat = CutPatch({cube, torch::Tensor(), {}}, e, {9, 9, 9});
  e.rotation = {0.0, 0.0, M_PI / 2};
  EXPECT_TRUE(torch::allclose(CutPatch({cube, torch::Tensor(), {}}, e, {9, 9, 9}).image,
                              torch::rot90(flat.image, 3, {1, 2}), 1e-5, 1e-5));

  e.rotation = {0.3, -0.2, 0.1};
  e.scale = 1.2;
  const std::vector<std::vector<double>> a = SpatialAffine(e, 3);
  // R is a rotation: A A^T = scale^2 I.
  for (size_t i = 0; i < 3; ++i)
    for (size_t j = 0; j < 3; ++j) {
      double dot = 0;
      for (size_t k = 0; k < 3; ++k) dot += a[i][k] * a[j][k];
      EXPECT_NEAR(dot, i == j ? 1.44 : 0.0, 1e-12);
    }
  // About axis 0 first: a rotation about axis 0 alone leaves axis 0 fixed.
  e.rotation = {0.4, 0.0, 0.0};
  e.scale = 1;
  EXPECT_NEAR(SpatialAffine(e, 3)[0][0], 1.0, 1e-12);
  // A constant case stays constant inside it, whatever the angle.
  e.rotation = {0.5, 0.2, -0.3};
  const torch::Tensor ones = torch::ones({1, 40, 40, 40});
  const Sample inside =
      CutPatch({ones, torch::ones({40, 40, 40}, torch::kInt64), {}}, e, {9, 9, 9});
  EXPECT_TRUE(torch::allclose(inside.image, torch::ones({1, 9, 9, 9}), 1e-5, 1e-5));
  EXPECT_EQ(inside.mask.min().item<int64_t>(), 1);
}

TEST(CropWithPadding, ZeroOutsideTheTensor) {
  const torch::Tensor t = torch::arange(1, 7).view({1, 6}).to(torch::kFloat32);
  EXPECT_TRUE(torch::equal(CropWithPadding(t, {-2}, {4}), torch::tensor({{0.f, 0.f, 1.f, 2.f}})));
  EXPECT_TRUE(torch::equal(CropWithPadding(t, {4}, {4}), torch::tensor({{5.f, 6.f, 0.f, 0.f}})));
  EXPECT_TRUE(torch::equal(CropWithPadding(t, {9}, {2}), torch::zeros({1, 2})));
}

TEST(Augment, IntensityTransformsKeepWhatNnunetKeeps) {
  torch::manual_seed(2);
  const torch::Tensor x = torch::randn({2, 8, 8, 8});
  const std::vector<int64_t> axes{1, 2, 3};
  // Contrast: each channel within its old range, mean unchanged where not clipped.
  const torch::Tensor c = ScaleContrast(x, 1.2);
  EXPECT_TRUE((c.amin(axes) >= x.amin(axes) - 1e-6).all().item<bool>());
  EXPECT_TRUE((c.amax(axes) <= x.amax(axes) + 1e-6).all().item<bool>());
  EXPECT_FALSE(torch::equal(c, x));
  // Gamma: a new shape, the old mean and standard deviation.
  const torch::Tensor g = AdjustGamma(x, 1.4);
  EXPECT_TRUE(torch::allclose(g.mean(axes), x.mean(axes), 1e-4, 1e-4));
  EXPECT_TRUE(torch::allclose(g.std(axes), x.std(axes), 1e-4, 1e-4));
  EXPECT_GT((g - x).abs().max().item<float>(), 0.01);
  EXPECT_TRUE(torch::allclose(ScaleBrightness(x, 0.8), x * 0.8));
  // Noise: its seed decides it.
  EXPECT_TRUE(torch::equal(AddNoise(x, 0.3, 9), AddNoise(x, 0.3, 9)));
  EXPECT_FALSE(torch::equal(AddNoise(x, 0.3, 9), AddNoise(x, 0.3, 10)));
  EXPECT_NEAR((AddNoise(x, 0.3, 9) - x).std().item<double>(), 0.3, 0.02);
  // Inverted gamma: bends the top of the range, keeps mean and spread.
  const torch::Tensor gi = AdjustGammaInverted(x, 1.4);
  EXPECT_TRUE(torch::allclose(gi.mean(axes), x.mean(axes), 1e-4, 1e-4));
  EXPECT_TRUE(torch::allclose(gi.std(axes), x.std(axes), 1e-4, 1e-4));
  EXPECT_FALSE(torch::allclose(gi, g, 1e-3, 1e-3));
}

TEST(Augment, BlurIsAUnitGaussianPerChannelAndAxis) {
  // A delta in channel 0 spreads into a symmetric bump summing to 1, wider
  // along the axis with the larger sigma; channel 1 has no sigmas: as it was.
  torch::Tensor x = torch::zeros({2, 15, 15});
  x[0][7][7] = 1;
  x[1] = torch::randn({15, 15});
  const torch::Tensor b = GaussianBlur(x, {{0.5, 1.0}, {}});
  EXPECT_NEAR(b[0].sum().item<double>(), 1.0, 1e-5);
  EXPECT_TRUE(torch::allclose(b[0], b[0].flip({0}), 1e-6, 1e-7));
  EXPECT_TRUE(torch::allclose(b[0], b[0].flip({1}), 1e-6, 1e-7));
  EXPECT_LT(b[0][6][7].item<float>(), b[0][7][6].item<float>());  // axis 1 wider
  EXPECT_TRUE(torch::equal(b[1], x[1]));
  // The kernel is sampled from exp(-x^2 / 2 sigma^2), normalised.
  const double w1 = std::exp(-0.5 / 1.0), w2 = std::exp(-2.0 / 1.0), w3 = std::exp(-4.5);
  EXPECT_NEAR(b[0][7][8].item<double>() / b[0][7][7].item<double>(), w1, 1e-5);
  EXPECT_NEAR(b[0][7][9].item<double>() / b[0][7][7].item<double>(), w2, 1e-5);
  EXPECT_NEAR(b[0][7][10].item<double>() / b[0][7][7].item<double>(), w3, 1e-5);
  // A constant image stays constant (the borders reflect).
  EXPECT_TRUE(torch::allclose(GaussianBlur(torch::full({1, 6, 7, 5}, 2.5), {{1, 1, 1}}),
                              torch::full({1, 6, 7, 5}, 2.5), 1e-5, 1e-5));
}

TEST(Augment, LowResolutionKeepsTheShapeAndLosesDetail) {
  // A checkerboard at half resolution is no longer one.
  const torch::Tensor board =
      ((torch::arange(16).view({16, 1}) + torch::arange(16).view({1, 16})) % 2)
          .to(torch::kFloat32)
          .unsqueeze(0);  // (1, 16, 16)
  const torch::Tensor x = torch::cat({board, board});
  const torch::Tensor low = SimulateLowResolution(x, {{0.5, 0.5}, {}});
  EXPECT_EQ(low.sizes(), x.sizes());
  EXPECT_FALSE(torch::allclose(low[0], board[0]));
  EXPECT_TRUE(torch::equal(low[1], board[0]));
  EXPECT_TRUE(torch::equal(SimulateLowResolution(x, {{1, 1}, {1, 1}}), x));
  const torch::Tensor flat = torch::full({1, 10, 12, 8}, -1.5);
  EXPECT_TRUE(torch::allclose(SimulateLowResolution(flat, {{0.6, 0.6, 0.6}}), flat));
}

}  // namespace
}  // namespace up
