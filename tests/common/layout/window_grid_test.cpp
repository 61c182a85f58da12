// Window geometry shared by predict and validation: every window of an image
// in MONAI's order (last axis fastest), padded axes with one window, and a
// validation plan that batches each case's windows without mixing cases.
#include "common/layout/window_grid.h"

#include <gtest/gtest.h>

namespace up {
namespace {

TEST(WindowGrid, LastAxisFastestAndShortAxesPadded) {
  const auto grid = WindowGrid({40, 20}, {32, 32}, 0.5);  // axis 0: 0, 8; axis 1 padded: 0
  EXPECT_EQ(grid, (std::vector<std::vector<int64_t>>{{0, 0}, {8, 0}}));
  const auto both = WindowGrid({40, 40}, {32, 32}, 0.5);
  EXPECT_EQ(both, (std::vector<std::vector<int64_t>>{{0, 0}, {0, 8}, {8, 0}, {8, 8}}));
  EXPECT_EQ(PaddedSize({40, 20, 5}, {32, 32, 8}), (std::vector<int64_t>{40, 32, 8}));
}

TEST(ValidationPlan, BatchesEachCaseApartAndMarksItsLast) {
  // Case 0: 2 x 2 = 4 windows; case 1: one window (smaller than the window).
  const auto plan = ValidationPlan({{40, 40}, {10, 12}}, {32, 32}, 0.5, 3);
  ASSERT_EQ(plan.size(), 3u);
  EXPECT_EQ(plan[0], (ValidationBatch{0, 0, 3, false}));
  EXPECT_EQ(plan[1], (ValidationBatch{0, 3, 1, true}));
  EXPECT_EQ(plan[2], (ValidationBatch{1, 0, 1, true}));
  EXPECT_TRUE(ValidationPlan({}, {32, 32}, 0.5, 2).empty());
}

TEST(WindowFor, ATwoDWindowOverAVolumeIsOneSliceDeep) {
  EXPECT_EQ(WindowFor({5, 40, 40}, {32, 32}), (std::vector<int64_t>{1, 32, 32}));
  EXPECT_EQ(WindowFor({40, 40}, {32, 32}), (std::vector<int64_t>{32, 32}));
  // Every slice, each with the 2-D grid: 3 slices x 4 windows.
  const auto grid = WindowGrid({3, 40, 40}, {32, 32}, 0.5);
  ASSERT_EQ(grid.size(), 12u);
  EXPECT_EQ(grid[4], (std::vector<int64_t>{1, 0, 0}));
  EXPECT_EQ(ValidationPlan({{3, 40, 40}}, {32, 32}, 0.5, 5).size(), 3u);
}

}  // namespace
}  // namespace up
