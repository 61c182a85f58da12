// Stopping a run by signal, as a user does with Ctrl-C or a scheduler with
// SIGTERM: the first signal finishes the step, checkpoints and exits 128+sig;
// resume then reaches the same param_digest as an uninterrupted run. A second
// SIGINT stops at once, still cleaning up, and loses nothing already saved.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <sstream>
#include <thread>

#include "tests/support/command.h"

namespace up::test {
namespace {

namespace fs = std::filesystem;

int MetricLines(const std::string& run) {
  std::istringstream lines(Slurp(run + "/metrics.jsonl"));
  int n = 0;
  for (std::string line; std::getline(lines, line);) n += !line.empty();
  return n;
}

// Waits until `run` has logged at least `steps` steps.
bool WaitForSteps(const std::string& run, int steps) {
  for (int i = 0; i < 600; ++i) {
    if (MetricLines(run) >= steps) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

void StopOnceThenResume(const std::vector<std::string>& mode, int sig) {
  TempDir dir;
  const std::string config = SourcePath("configs/tiny.yaml");
  std::vector<std::string> args{
      BinPath("unet-pipeline"), "train", "--config",           config,  "--set",
      "train.steps=30",         "--set", "checkpoint.every=0", "--out", dir / "run"};
  args.insert(args.end(), mode.begin(), mode.end());
  BackgroundCommand run(args);
  ASSERT_TRUE(WaitForSteps(dir / "run", 2));
  kill(run.pid(), sig);
  CommandResult r = run.Wait();
  ASSERT_EQ(r.exit_code, 128 + sig) << r.output;
  EXPECT_NE(r.output.find("--resume"), std::string::npos) << r.output;
  const int stopped_at = MetricLines(dir / "run");
  ASSERT_LT(stopped_at, 30);
  EXPECT_TRUE(
      fs::exists(dir / ("run/checkpoints/step-" + std::to_string(stopped_at) + "/manifest.json")))
      << "the step the run stopped at must be checkpointed";

  std::vector<std::string> resume{BinPath("unet-pipeline"), "train", "--resume", dir / "run"};
  resume.insert(resume.end(), mode.begin(), mode.end());
  CommandResult again = RunCommand(resume);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  std::vector<std::string> straight{BinPath("unet-pipeline"),
                                    "train",
                                    "--config",
                                    config,
                                    "--set",
                                    "train.steps=30",
                                    "--out",
                                    dir / "straight",
                                    "--single-process"};
  ASSERT_EQ(RunCommand(straight).exit_code, 0);
  EXPECT_EQ(RunDigest(dir / "run"), RunDigest(dir / "straight"));
}

TEST(Stop, SigtermCheckpointsThePipelineAndResumeIsExact) { StopOnceThenResume({}, SIGTERM); }
TEST(Stop, SigtermCheckpointsEveryPartOfSixStagesAndResumeIsExact) {
  StopOnceThenResume({"--set", "pipeline.encoder_parts=3", "--set", "pipeline.decoder_parts=3"},
                     SIGTERM);
}
TEST(Stop, SigintCheckpointsSingleProcessAndResumeIsExact) {
  StopOnceThenResume({"--single-process"}, SIGINT);
}

TEST(Stop, SecondSigintStopsAtOnceAndKeepsTheLastCheckpoint) {
  TempDir dir;
  BackgroundCommand run({BinPath("unet-pipeline"), "train", "--config",
                         SourcePath("configs/tiny.yaml"), "--set", "train.steps=100000", "--set",
                         "checkpoint.every=2", "--out", dir / "run"});
  ASSERT_TRUE(WaitForSteps(dir / "run", 3));
  kill(run.pid(), SIGINT);
  kill(run.pid(), SIGINT);
  CommandResult r = run.Wait(60);
  EXPECT_EQ(r.exit_code, 130) << r.output;
  EXPECT_NE(r.output.find("--resume"), std::string::npos) << r.output;
  const size_t at = r.output.find("run id ");
  ASSERT_NE(at, std::string::npos) << r.output;
  const std::string id = r.output.substr(at + 7, 32);
  for (const char* folder : {"/dev/shm", "/tmp"}) {
    for (const auto& e : fs::directory_iterator(folder)) {
      EXPECT_EQ(e.path().filename().string().find(id), std::string::npos)
          << "leftover " << e.path();
    }
  }
  // What was saved is intact: the run resumes from its newest checkpoint.
  CommandResult again =
      RunCommand({BinPath("unet-pipeline"), "train", "--resume", dir / "run", "--set",
                  "train.steps=" + std::to_string(MetricLines(dir / "run") + 1)});
  EXPECT_EQ(again.exit_code, 0) << again.output;
}

}  // namespace
}  // namespace up::test
