// Validation Dice as nnU-Net scores it: per case, NaN where a class is in
// neither reference nor prediction (so that case does not count for it),
// classes averaged over the cases that have them, val_dice the mean of the
// classes (regions reported beside it, not in it).
#include "common/run/val_metrics.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "common/run/checkpoint_manifest.h"

namespace up {
namespace {

namespace fs = std::filesystem;

TEST(ValidationEntries, ClassesThenTheBratsRegions) {
  const std::vector<ValidationEntry> plain = ValidationEntries(3, false);
  ASSERT_EQ(plain.size(), 2u);
  EXPECT_EQ(plain[0].key, "1");
  EXPECT_EQ(plain[1].classes, (std::vector<int64_t>{2}));
  const std::vector<ValidationEntry> brats = ValidationEntries(4, true);
  ASSERT_EQ(brats.size(), 6u);
  EXPECT_EQ(brats[3].key, "wt");
  EXPECT_EQ(brats[3].classes, (std::vector<int64_t>{1, 2, 3}));  // labels 1, 2, 4
  EXPECT_EQ(brats[4].classes, (std::vector<int64_t>{1, 3}));     // labels 1, 4
  EXPECT_EQ(brats[5].classes, (std::vector<int64_t>{3}));        // label 4
  EXPECT_TRUE(brats[5].region);
  EXPECT_FALSE(brats[2].region);
}

TEST(ScoreValidation, PerCaseDiceAveragedOverTheCasesThatHaveTheClass) {
  const std::vector<ValidationEntry> entries = ValidationEntries(3, false);
  // case 0: class 1 TP 3 FP 1 FN 2 -> 6/9; class 2 absent from both -> no score.
  // case 1: class 1 TP 1 FP 0 FN 0 -> 1;   class 2 TP 0 FP 2 FN 0 -> 0.
  const ValidationScores s = ScoreValidation({{3, 1, 2, 0, 0, 0}, {1, 0, 0, 0, 2, 0}}, entries);
  EXPECT_EQ(s.cases, 2);
  ASSERT_EQ(s.per_entry.size(), 2u);
  EXPECT_DOUBLE_EQ(s.per_entry[0], (6.0 / 9.0 + 1.0) / 2);
  EXPECT_DOUBLE_EQ(s.per_entry[1], 0.0);  // case 1 only
  EXPECT_DOUBLE_EQ(s.mean, (s.per_entry[0] + s.per_entry[1]) / 2);
}

TEST(ScoreValidation, RegionsAreNotInTheMeanAndAnAbsentClassIsNaN) {
  const std::vector<ValidationEntry> entries = ValidationEntries(4, true);
  std::vector<int64_t> one(3 * entries.size(), 0);
  one[0] = 5;          // class 1 perfect
  one[3 * 3] = 4;      // wt: TP 4
  one[3 * 3 + 1] = 4;  // wt: FP 4 -> 8/12
  const ValidationScores s = ScoreValidation({one}, entries);
  EXPECT_DOUBLE_EQ(s.per_entry[0], 1.0);
  EXPECT_TRUE(std::isnan(s.per_entry[1]));
  EXPECT_TRUE(std::isnan(s.per_entry[2]));
  EXPECT_DOUBLE_EQ(s.per_entry[3], 8.0 / 12.0);
  EXPECT_DOUBLE_EQ(s.mean, 1.0);  // the only class with a score
  EXPECT_TRUE(std::isnan(ScoreValidation({}, entries).mean));
  EXPECT_THROW(ScoreValidation({{1, 2, 3}}, entries), std::invalid_argument);
}

TEST(BestValidation, KeepsTheHighestMeanAndItsStep) {
  BestValidation best;
  ValidationScores s;
  s.mean = 0.4;
  EXPECT_TRUE(best.Offer(s, 2));
  s.mean = 0.3;
  EXPECT_FALSE(best.Offer(s, 4));
  s.mean = std::nan("");
  EXPECT_FALSE(best.Offer(s, 6));
  s.mean = 0.5;
  EXPECT_TRUE(best.Offer(s, 8));
  EXPECT_EQ(best.step, 8);
  EXPECT_DOUBLE_EQ(best.dice, 0.5);
}

TEST(RecallBestValidation, TheBestCheckpointsStepAndItsScore) {
  const fs::path run = fs::temp_directory_path() / ("val_metrics_test." + std::to_string(getpid()));
  fs::remove_all(run);
  EXPECT_EQ(RecallBestValidation(run.string()).dice, -1);  // no run yet
  fs::create_directories(run / "checkpoints" / "best-2");
  fs::create_directory_symlink("best-2", run / "checkpoints" / "best");
  CheckpointManifest m;
  m.step = 2;
  m.model_signature = m.config_sha256 = std::string(64, 'a');
  m.files.push_back({"encoder.pt", 1, std::string(64, 'b')});
  std::ofstream(run / "checkpoints" / "best-2" / "manifest.json") << ManifestJson(m);
  std::ofstream(run / "metrics.jsonl") << "{\"step\":1,\"loss\":1,\"dice\":0}\n"
                                       << "{\"step\":2,\"loss\":1,\"dice\":0,\"val_dice\":0.75}\n"
                                       << "{\"step\":4,\"loss\":1,\"dice\":0,\"val_dice\":0.5}\n";
  const BestValidation best = RecallBestValidation(run.string());
  EXPECT_EQ(best.step, 2);
  EXPECT_DOUBLE_EQ(best.dice, 0.75);
  ValidationScores worse;
  worse.mean = 0.6;
  BestValidation resumed = best;
  EXPECT_FALSE(resumed.Offer(worse, 6));  // after a resume, 0.6 does not beat 0.75
  fs::remove_all(run);
}

}  // namespace
}  // namespace up
