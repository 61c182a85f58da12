// Leftovers of dead runs are removed; those of live runs and unrelated names are not.
#include "launcher/stale_runs.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/support/command.h"

namespace up {
namespace {

namespace fs = std::filesystem;

pid_t DeadPid() {
  const pid_t pid = fork();
  if (pid == 0) _exit(0);
  waitpid(pid, nullptr, 0);
  return pid;
}

const std::string kHex = "0123456789abcdef0123456789abcdef";

TEST(StaleRuns, RemovesOnlyWhatDeadLaunchersLeft) {
  test::TempDir shm, tmp;
  const std::string dead = RunNamePrefix(DeadPid(), kHex);
  const std::string live = RunNamePrefix(getpid(), kHex);
  std::ofstream(shm / (dead + "-fwd")) << "x";
  std::ofstream(shm / (live + "-fwd")) << "x";
  std::ofstream(shm / "up-test-ring") << "x";
  std::ofstream(shm / "up-123-nothex") << "x";
  fs::create_directories(tmp / (dead + "-abcdef"));
  std::ofstream((tmp / (dead + "-abcdef")) + "/control.sock") << "";

  const auto removed = RemoveStaleRuns(shm.path(), tmp.path());
  EXPECT_EQ(removed.size(), 2u);
  EXPECT_FALSE(fs::exists(shm / (dead + "-fwd")));
  EXPECT_FALSE(fs::exists(tmp / (dead + "-abcdef")));
  EXPECT_TRUE(fs::exists(shm / (live + "-fwd")));
  EXPECT_TRUE(fs::exists(shm / "up-test-ring"));
  EXPECT_TRUE(fs::exists(shm / "up-123-nothex"));
}

TEST(StaleRuns, TheNextRunRemovesADeadRunsSegment) {
  test::TempDir dir;
  const std::string stale = "/dev/shm/" + RunNamePrefix(DeadPid(), kHex) + "-fwd";
  std::ofstream(stale) << "left by a launcher killed with SIGKILL";
  test::CommandResult r = test::RunCommand({test::BinPath("unet-pipeline"), "train", "--config",
                                            test::SourcePath("configs/tiny.yaml"), "--set",
                                            "train.steps=1", "--out", dir / "run"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(fs::exists(stale)) << "this run (or another started meanwhile) removes it";
}

}  // namespace
}  // namespace up
