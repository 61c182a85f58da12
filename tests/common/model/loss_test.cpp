// Region-based training's pieces (model.regions, nnU-Net's regions): the
// loss is binary cross-entropy on the region maps plus the soft Dice of the
// sigmoids over every region, a prediction paints each region's class in
// order, and the training Dice counts regions.
#include "common/model/loss.h"

#include <gtest/gtest.h>

#include <cmath>

namespace up {
namespace {

ModelConfig Regions() {
  ModelConfig m;
  m.num_classes = 2;
  m.regions = {{1, 2}, {2}};  // "organ" holds the lesion, "lesion"
  m.regions_class_order = {1, 2};
  return m;
}

TEST(RegionLoss, IsBinaryCrossEntropyPlusSoftDiceOverTheRegions) {
  torch::manual_seed(5);
  const torch::Tensor logits = torch::randn({2, 2, 4, 5});                      // (N, R, H, W)
  const torch::Tensor target = torch::randint(0, 3, {2, 4, 5}, torch::kInt64);  // classes 0..2
  LossSpec spec;
  spec.kind = LossKind::kCeDice;
  spec.nnunet = true;
  spec.batch_dice = false;
  spec.regions = Regions().regions;
  const double loss = SegmentationLoss({logits}, target, spec).item<double>();

  // By hand, voxel by voxel.
  const auto l = logits.accessor<float, 4>();
  const auto t = target.accessor<int64_t, 3>();
  double bce = 0, dice = 0;
  for (int n = 0; n < 2; ++n) {
    for (int r = 0; r < 2; ++r) {
      double inter = 0, pred = 0, gt = 0;
      for (int y = 0; y < 4; ++y) {
        for (int x = 0; x < 5; ++x) {
          const double z = l[n][r][y][x];
          const double in = r == 0 ? (t[n][y][x] >= 1) : (t[n][y][x] == 2);
          const double p = 1 / (1 + std::exp(-z));
          bce += -(in * std::log(p) + (1 - in) * std::log(1 - p));
          inter += p * in;
          pred += p;
          gt += in;
        }
      }
      dice += (2 * inter + 1e-5) / (gt + pred + 1e-5);
    }
  }
  const double expected = bce / (2 * 2 * 4 * 5) - dice / 4;
  EXPECT_NEAR(loss, expected, 1e-5);
}

TEST(PredictedClasses, RegionsPaintTheirClassesInOrder) {
  const ModelConfig m = Regions();
  // Voxel 0: neither; 1: organ only; 2: both (the lesion paints over); 3:
  // lesion alone (painted 2 all the same, as nnU-Net's LabelManager does).
  const torch::Tensor logits =
      torch::tensor({-3.f, 2.f, 2.f, -1.f, -2.f, -2.f, 4.f, 1.f}).view({1, 2, 4});
  EXPECT_TRUE(torch::equal(PredictedClasses(logits, m), torch::tensor({{0, 1, 2, 2}})));
  // Without regions: the argmax.
  ModelConfig plain;
  plain.num_classes = 2;
  EXPECT_TRUE(torch::equal(PredictedClasses(logits, plain), torch::tensor({{1, 0, 1, 1}})));
}

TEST(DiceCounter, CountsEachRegion) {
  DiceCounter dice(Regions());
  const torch::Tensor logits =
      torch::tensor({-3.f, 2.f, 2.f, -1.f, -2.f, -2.f, 4.f, 1.f}).view({1, 2, 4});
  dice.Add(logits, torch::tensor({{0, 1, 2, 0}}));
  // Organ: predicted {1, 2}, true {1, 2}: 1. Lesion: predicted {2, 3}, true {2}: 2/3.
  EXPECT_NEAR(dice.Mean(), (1.0 + 2.0 / 3.0) / 2, 1e-12);
  EXPECT_EQ(dice.counts().size(), 9u);
}

}  // namespace
}  // namespace up
