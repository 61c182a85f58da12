// Runs made before the config table still resume: tests/data/old_run is a
// run folder main wrote with the hand-written config reader and dump (its
// ABOUT.md says how). A copy resumes from its step-1 checkpoint to step 2
// and must end where a fresh run of the same config.yaml ends, bit for bit.
// Its step 1 was trained with AVX2 kernels, so both runs here are held to
// them (HoldKernelsToAvx2).
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/support/command.h"
#include "tests/support/training_checks.h"

namespace up::test {
namespace old_run_test {

namespace fs = std::filesystem;

TEST(OldRunFolder, ResumesToTheSameWeightsAsAFreshRun) {
  HoldKernelsToAvx2();
  TempDir dir;
  const fs::path old = dir / "old";
  fs::copy(SourcePath("tests/data/old_run"), old, fs::copy_options::recursive);
  fs::remove(old / "ABOUT.md");

  CommandResult resumed = RunCommand({BinPath("unet-pipeline"), "train", "--resume", old.string()});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  // Only step 2 was trained: step 1 came from the old checkpoint.
  EXPECT_EQ(resumed.output.find("step 1/2"), std::string::npos) << resumed.output;
  EXPECT_NE(resumed.output.find("step 2/2"), std::string::npos) << resumed.output;
  EXPECT_TRUE(fs::exists(old / "checkpoints/step-2/manifest.json")) << resumed.output;

  CommandResult fresh =
      RunCommand({BinPath("unet-pipeline"), "train", "--config",
                  SourcePath("tests/data/old_run/config.yaml"), "--out", dir / "fresh"});
  ASSERT_EQ(fresh.exit_code, 0) << fresh.output;
  EXPECT_EQ(RunDigest(old.string()).size(), 64u);
  EXPECT_EQ(RunDigest(old.string()), RunDigest(dir / "fresh"));
  ExpectNothingLeft(old.string());
}

}  // namespace old_run_test
}  // namespace up::test
