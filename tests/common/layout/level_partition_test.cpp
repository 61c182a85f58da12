// Cutting a U-Net's levels into pipeline parts: the user's cuts, checked
// with the valid range in the error, and balanced cuts that match a brute
// force over every way to cut.
#include "common/layout/level_partition.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "common/base/errors.h"

namespace up {
namespace {

TEST(PartsFromCuts, RunsOfAdjacentLevelsAndOneLineForAnEmptyPart) {
  EXPECT_EQ(PartsFromCuts(5, {}, "k"), (std::vector<PartRange>{{0, 5}}));
  EXPECT_EQ(PartsFromCuts(5, {2, 3}, "k"), (std::vector<PartRange>{{0, 2}, {2, 1}, {3, 2}}));
  for (const std::vector<int>& bad :
       {std::vector<int>{0}, std::vector<int>{5}, std::vector<int>{3, 3}, std::vector<int>{3, 2}}) {
    try {
      PartsFromCuts(5, bad, "pipeline.cuts.encoder");
      ADD_FAILURE() << "accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("pipeline.cuts.encoder: cut "), std::string::npos);
      EXPECT_NE(std::string(e.what()).find("each in [1, 4] (5 levels)"), std::string::npos)
          << e.what();
    }
  }
}

// The least largest part over every way to cut `cost` into `parts`.
int64_t BruteForce(const std::vector<int64_t>& cost, int parts) {
  const int n = static_cast<int>(cost.size());
  int64_t best = -1;
  for (int mask = 0; mask < (1 << (n - 1)); ++mask) {
    if (__builtin_popcount(mask) != parts - 1) continue;
    int64_t part = 0, worst = 0;
    for (int i = 0; i < n; ++i) {
      part += cost[i];
      if (i == n - 1 || (mask >> i) & 1) {
        worst = std::max(worst, part);
        part = 0;
      }
    }
    if (best < 0 || worst < best) best = worst;
  }
  return best;
}

TEST(BalancedCuts, TheCostliestPartCostsLeast) {
  EXPECT_EQ(BalancedCuts({4, 1, 1, 1, 1}, 2, "k"), (std::vector<int>{1}));
  EXPECT_EQ(BalancedCuts({1, 1, 1, 1}, 2, "k"), (std::vector<int>{2}));
  EXPECT_EQ(BalancedCuts({5, 5, 5}, 3, "k"), (std::vector<int>{1, 2}));
  EXPECT_TRUE(BalancedCuts({3, 2}, 1, "k").empty());
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 8);
    std::vector<int64_t> cost(static_cast<size_t>(n));
    for (int64_t& c : cost) c = static_cast<int64_t>(rng() % 100);
    const int parts = 1 + static_cast<int>(rng() % n);
    const std::vector<int> cuts = BalancedCuts(cost, parts, "k");
    ASSERT_EQ(static_cast<int>(cuts.size()), parts - 1);
    int64_t worst = 0;
    for (const PartRange& p : PartsFromCuts(n, cuts, "k")) {
      int64_t sum = 0;
      for (int i = p.first; i < p.first + p.count; ++i) sum += cost[static_cast<size_t>(i)];
      worst = std::max(worst, sum);
    }
    EXPECT_EQ(worst, BruteForce(cost, parts));
  }
}

TEST(BalancedCuts, MorePartsThanLevelsIsOneLine) {
  try {
    BalancedCuts({1, 2, 3}, 4, "pipeline.encoder_parts");
    ADD_FAILURE() << "accepted";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(),
                 "pipeline.encoder_parts = 4: must be in [1, 3], one part per level at most (3 "
                 "levels)");
  }
  EXPECT_THROW(BalancedCuts({1, 2}, 0, "k"), UsageError);
}

}  // namespace
}  // namespace up
