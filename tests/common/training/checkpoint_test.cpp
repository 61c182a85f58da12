// Checkpoints: a stage file restores weights, buffers and optimizer state
// exactly; bad checkpoints are skipped with a warning; a foreign model is
// refused; a staging folder is never mistaken for a checkpoint.
#include "common/training/checkpoint.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/base/errors.h"
#include "common/model/digest.h"
#include "common/model/unet.h"
#include "common/training/stage_optimizer.h"
#include "tests/support/command.h"

namespace up {
namespace {

namespace fs = std::filesystem;

Config SmallConfig() {
  Config c;
  c.model.features = {4, 8};
  c.data.size = {8, 8};
  c.checkpoint.keep = 5;
  return c;
}

// One Adam step on random data, so the optimizer has state.
void TrainOnce(UNetEncoder& enc, StageOptimizer& opt, int64_t step) {
  opt.BeginStep(step);
  enc->forward(torch::randn({2, 4, 8, 8})).bottleneck.square().mean().backward();
  opt.Step(opt.GradNorms());
}

std::string Digest(UNetEncoder& enc) { return ParamDigest(NamedState(*enc), {}); }

TEST(StageFile, RoundTripRestoresWeightsAndOptimizerExactly) {
  test::TempDir dir;
  Config c = SmallConfig();
  torch::manual_seed(1);
  UNetEncoder a(c.model, 1);
  StageOptimizer opt_a(*a, c.train);
  TrainOnce(a, opt_a, 0);
  SaveStageFile(dir / "enc.pt", *a, opt_a.optimizer(), 1);

  UNetEncoder b(c.model, 99);  // other weights, to be overwritten
  StageOptimizer opt_b(*b, c.train);
  EXPECT_NE(Digest(a), Digest(b));
  EXPECT_EQ(LoadStageFile(dir / "enc.pt", *b, opt_b.optimizer()), 1);
  EXPECT_EQ(Digest(a), Digest(b));

  // The same next step on both: equal only if Adam's moments were restored.
  torch::manual_seed(5);
  TrainOnce(a, opt_a, 1);
  torch::manual_seed(5);
  TrainOnce(b, opt_b, 1);
  EXPECT_EQ(Digest(a), Digest(b));
}

TEST(StageFile, OtherArchitectureIsAUsageError) {
  test::TempDir dir;
  Config c = SmallConfig();
  UNetEncoder a(c.model, 1);
  StageOptimizer opt_a(*a, c.train);
  SaveStageFile(dir / "enc.pt", *a, opt_a.optimizer(), 0);
  Config other = SmallConfig();
  other.model.features = {4, 16};
  UNetEncoder b(other.model, 1);
  StageOptimizer opt_b(*b, other.train);
  EXPECT_THROW(LoadStageFile(dir / "enc.pt", *b, opt_b.optimizer()), UsageError);
}

class Checkpoints : public ::testing::Test {
 protected:
  void Commit(int64_t step) {
    UNetEncoder enc(config_.model, step);
    StageOptimizer opt(*enc, config_.train);
    const std::string staging = BeginCheckpoint(dir_.path(), step);
    SaveStageFile(staging + "/encoder.pt", *enc, opt.optimizer(), step);
    CommitCheckpoint(dir_.path(), staging, step, {"encoder.pt"}, config_);
  }
  std::optional<CheckpointRef> Latest() {
    return FindLatestCheckpoint(dir_.path(), config_,
                                [this](const std::string& w) { warnings_.push_back(w); });
  }

  test::TempDir dir_;
  Config config_ = SmallConfig();
  std::vector<std::string> warnings_;
};

TEST_F(Checkpoints, NewestWinsAndOldOnesArePruned) {
  config_.checkpoint.keep = 2;
  for (int s : {1, 2, 3}) Commit(s);
  auto latest = Latest();
  ASSERT_TRUE(latest);
  EXPECT_EQ(latest->step, 3);
  EXPECT_FALSE(fs::exists(dir_ / "checkpoints/step-1"));
  EXPECT_TRUE(fs::exists(dir_ / "checkpoints/step-2"));
  EXPECT_TRUE(warnings_.empty());
}

TEST_F(Checkpoints, TruncatedFileFallsBackToOlderWithWarning) {
  Commit(1);
  Commit(2);
  fs::resize_file(dir_ / "checkpoints/step-2/encoder.pt", 100);
  auto latest = Latest();
  ASSERT_TRUE(latest);
  EXPECT_EQ(latest->step, 1);
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("step-2"), std::string::npos) << warnings_[0];
}

TEST_F(Checkpoints, CorruptByteOrMissingManifestFallsBack) {
  Commit(1);
  Commit(2);
  Commit(3);
  {
    std::fstream f(dir_ / "checkpoints/step-3/encoder.pt",
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    f.put('\x5a');
  }
  fs::remove(dir_ / "checkpoints/step-2/manifest.json");
  auto latest = Latest();
  ASSERT_TRUE(latest);
  EXPECT_EQ(latest->step, 1);
  EXPECT_EQ(warnings_.size(), 2u);
}

TEST_F(Checkpoints, StagingFolderIsNotACheckpoint) {
  Commit(1);
  BeginCheckpoint(dir_.path(), 2);  // a crash mid-save leaves this behind
  auto latest = Latest();
  ASSERT_TRUE(latest);
  EXPECT_EQ(latest->step, 1);
}

TEST_F(Checkpoints, ForeignModelIsRefused) {
  Commit(1);
  config_.model.features = {4, 16};
  EXPECT_THROW(Latest(), UsageError);
}

TEST_F(Checkpoints, NoneIsNullopt) { EXPECT_FALSE(Latest()); }

}  // namespace
}  // namespace up
