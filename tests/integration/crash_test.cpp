// Crashes and hangs anywhere in a run, with real processes and real shared
// memory: each case makes one process (a stage or the launcher) raise SIGKILL
// or SIGSTOP on itself at a named point (UP_TEST_KILL_AT / UP_TEST_HANG_AT,
// common/base/test_hooks.h). Then:
//   - a dead stage is noticed within a second and the launcher exits 1 with one
//     line naming the stage, its signal and the step; a killed launcher exits
//     137 and its stages exit with it;
//   - no process of the run remains, and no segment or socket folder either
//     (a dead launcher's leftovers are removed by the next run, which says so);
//   - --resume reaches the same param_digest as an uninterrupted run.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <regex>
#include <thread>

#include "tests/support/command.h"

namespace up::test {
namespace {

namespace fs = std::filesystem;

constexpr int kSteps = 4;

int64_t MonotonicMicros() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000000 + now.tv_nsec / 1000;
}

std::vector<std::string> Train(const std::string& run, const std::string& hook_var,
                               const std::string& hook, std::vector<std::string> args) {
  std::vector<std::string> argv{"/usr/bin/env"};
  if (!hook_var.empty()) argv.push_back(hook_var + "=" + hook);
  argv.insert(argv.end(), {BinPath("unet-pipeline"), "train"});
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

// Segments (/dev/shm) and socket folders (/tmp) of the launcher with this pid.
std::vector<std::string> Leftovers(int launcher_pid) {
  const std::string prefix = "up-" + std::to_string(launcher_pid) + "-";
  std::vector<std::string> found;
  for (const char* folder : {"/dev/shm", "/tmp"}) {
    for (const auto& e : fs::directory_iterator(folder)) {
      if (e.path().filename().string().rfind(prefix, 0) == 0) found.push_back(e.path().string());
    }
  }
  return found;
}

// Waits up to `seconds` for the run's processes to be gone.
bool NoProcessesWithin(const std::string& run, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!ProcessesMentioning(run + "/config.yaml").empty()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

// The "monotonic_us=N" of the hook's line, or -1.
int64_t HookTime(const std::string& output) {
  std::smatch m;
  if (!std::regex_search(output, m,
                         std::regex("TEST HOOK UP_TEST_[A-Z_]+: .* \\(monotonic_us=(\\d+)\\)")))
    return -1;
  return std::stoll(m[1]);
}

struct KillCase {
  const char* hook;    // UP_TEST_KILL_AT value
  int exit_code;       // 1: a stage died; 137: the launcher was killed
  const char* says;    // regex the launcher's error line must match (stage deaths)
  bool parts = false;  // six stages: each half in three parts (the middle ones too)
  // Recompute by blocks with the kept inputs parked in host memory
  // (pipeline.offload): killed while they are parked.
  bool offload = false;
  // Two replicas of the pipeline (pipeline.replicas: 2): a stage of either
  // killed, its copy perhaps waiting in the gradient exchange.
  bool replicas = false;
};

class KillAnywhere : public ::testing::TestWithParam<KillCase> {};

// Kills at a step (>= 2) hit a fresh run with a checkpoint after every step;
// kills without a step (start-up, shutdown) hit a run that first trained step
// 1 and is resumed to kSteps, so that there is always something to lose.
TEST_P(KillAnywhere, CleanExitNothingLeftExactResume) {
  const KillCase c = GetParam();
  TempDir dir;
  const std::string run = dir / "run";
  const std::string steps = "train.steps=" + std::to_string(kSteps);
  std::vector<std::string> fresh{"--config", SourcePath("configs/tiny.yaml"),
                                 "--out",    run,
                                 "--set",    "checkpoint.every=1",
                                 "--set",    "checkpoint.keep=10"};
  if (c.parts) {
    fresh.insert(fresh.end(),
                 {"--set", "pipeline.encoder_parts=3", "--set", "pipeline.decoder_parts=3"});
  }
  if (c.offload) {
    fresh.insert(fresh.end(), {"--set", "pipeline.activations=recompute", "--set",
                               "pipeline.recompute_unit=block", "--set", "pipeline.offload=on"});
  }
  // Instance norm: with BatchNorm each replica keeps its own running
  // statistics (as DDP's ranks do), which one process cannot match.
  if (c.replicas)
    fresh.insert(fresh.end(), {"--set", "pipeline.replicas=2", "--set", "model.norm=instance"});
  std::vector<std::string> killed_args{"--resume", run, "--set", steps};
  if (std::count(c.hook, c.hook + std::strlen(c.hook), ':') == 2) {
    killed_args = fresh;
    killed_args.insert(killed_args.end(), {"--set", steps});
  } else {
    fresh.insert(fresh.end(), {"--set", "train.steps=1"});
    CommandResult first = RunCommand(Train(run, "", "", fresh), 120);
    ASSERT_EQ(first.exit_code, 0) << first.output;
  }

  BackgroundCommand killed(Train(run, "UP_TEST_KILL_AT", c.hook, killed_args));
  const int launcher_pid = killed.pid();
  CommandResult r = killed.Wait(120);
  const int64_t ended_us = MonotonicMicros();
  ASSERT_EQ(r.exit_code, c.exit_code) << r.output;
  const int64_t hook_us = HookTime(r.output);
  ASSERT_GT(hook_us, 0) << "the hook did not fire:\n" << r.output;
  if (c.exit_code == 1) {
    // One line naming the stage, its signal and the step, soon after the kill.
    std::smatch line;
    ASSERT_TRUE(std::regex_search(r.output, line,
                                  std::regex(std::string("unet-pipeline: error: ") + c.says)))
        << r.output;
    EXPECT_NE(r.output.find("is intact: continue with --resume " + run), std::string::npos)
        << r.output;
    std::cout << c.hook << ": the launcher noticed, cleaned up and exited "
              << (ended_us - hook_us) / 1e3 << " ms after the kill\n";
    EXPECT_LT(ended_us - hook_us, 2000000)
        << "the launcher took " << (ended_us - hook_us) / 1e6 << " s to notice and clean up";
    EXPECT_TRUE(NoProcessesWithin(run, 0)) << "a stage of the run is still running";
    EXPECT_TRUE(Leftovers(launcher_pid).empty());
  } else {
    EXPECT_TRUE(NoProcessesWithin(run, 3)) << "the stages outlived their launcher by 3 s";
  }

  std::vector<std::string> again{"--resume", run, "--set", steps};
  r = RunCommand(Train(run, "", "", again), 120);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(Leftovers(launcher_pid).empty())
      << "the next run removes a dead launcher's leftovers";
  if (c.exit_code == 137 &&
      r.output.find("left behind by a run whose launcher died") == std::string::npos) {
    // Another test's launcher may have removed them first; either way, gone.
    std::cerr << "note: the leftovers were removed by a concurrent run\n";
  }
  EXPECT_TRUE(NoProcessesWithin(run, 0));

  std::vector<std::string> straight{"--single-process",
                                    "--config",
                                    SourcePath("configs/tiny.yaml"),
                                    "--out",
                                    dir / "straight",
                                    "--set",
                                    steps};
  // One process sums the replicas' gradients in their order (replica_gradients.h).
  if (c.replicas) {
    straight.insert(straight.end(),
                    {"--set", "pipeline.replicas=2", "--set", "model.norm=instance"});
  }
  r = RunCommand(Train(run, "", "", straight), 120);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(RunDigest(run), RunDigest(dir / "straight"));
  EXPECT_EQ(RunDigest(run).size(), 64u);
}

INSTANTIATE_TEST_SUITE_P(
    Points, KillAnywhere,
    ::testing::Values(
        KillCase{"encoder:start", 1,
                 "encoder stage killed by signal 9 \\(SIGKILL\\) during start-up before step 2"},
        KillCase{"decoder:hello", 1,
                 "decoder stage killed by signal 9 \\(SIGKILL\\) during .*of step 2"},
        KillCase{"encoder:turn:3", 1,
                 "encoder stage killed by signal 9 \\(SIGKILL\\) during encoder turn \\[F0 F1\\] "
                 "of step 3"},
        KillCase{"encoder:forward:3", 1,
                 "encoder stage killed by signal 9 \\(SIGKILL\\) during encoder turn \\[F0 F1\\] "
                 "of step 3"},
        KillCase{
            "decoder:forward:3", 1,
            "decoder stage killed by signal 9 \\(SIGKILL\\) during decoder turn \\[FB0 FB1 S\\] "
            "of step 3"},
        KillCase{
            "decoder:backward:2", 1,
            "decoder stage killed by signal 9 \\(SIGKILL\\) during decoder turn \\[FB0 FB1 S\\] "
            "of step 2"},
        KillCase{"encoder:backward:3", 1,
                 "encoder stage killed by signal 9 \\(SIGKILL\\) during encoder turn \\[B0 B1 S\\] "
                 "of step 3"},
        KillCase{
            "decoder:step:3", 1,
            "decoder stage killed by signal 9 \\(SIGKILL\\) during decoder turn \\[FB0 FB1 S\\] "
            "of step 3"},
        KillCase{"encoder:save:3", 1,
                 "encoder stage killed by signal 9 \\(SIGKILL\\) during checkpoint of step 3"},
        KillCase{"decoder:save:2", 1,
                 "decoder stage killed by signal 9 \\(SIGKILL\\) during checkpoint of step 2"},
        KillCase{"decoder:finish", 1,
                 "decoder stage killed by signal 9 \\(SIGKILL\\) during shutdown after step 4"},
        KillCase{"launcher:spawn", 137, ""}, KillCase{"launcher:turn:3", 137, ""},
        KillCase{"launcher:save:3", 137, ""}, KillCase{"launcher:finish", 137, ""},
        // The middle parts of a six-stage run.
        KillCase{"encoder2:forward:3", 1,
                 "encoder part 2 of 3 killed by signal 9 \\(SIGKILL\\) during encoder2 turn "
                 "\\[F0 F1\\] of step 3",
                 true},
        KillCase{"decoder2:backward:2", 1,
                 "decoder part 2 of 3 killed by signal 9 \\(SIGKILL\\) during decoder2 turn "
                 "\\[B0 B1 S\\] of step 2",
                 true},
        KillCase{"decoder2:hello", 1,
                 "decoder part 2 of 3 killed by signal 9 \\(SIGKILL\\) during .*of step 2", true},
        KillCase{"encoder2:save:3", 1,
                 "encoder part 2 of 3 killed by signal 9 \\(SIGKILL\\) during checkpoint of "
                 "step 3",
                 true},
        // Killed with what recompute keeps parked in host memory.
        KillCase{"encoder:backward:3", 1,
                 "encoder stage killed by signal 9 \\(SIGKILL\\) during encoder turn \\[B0 B1 "
                 "S\\] of step 3",
                 false, true},
        KillCase{
            "decoder:forward:3", 1,
            "decoder stage killed by signal 9 \\(SIGKILL\\) during decoder turn \\[FB0 FB1 S\\] "
            "of step 3",
            false, true},
        // Two replicas: a stage of replica 1 at start-up, in its backward
        // (replica 0's copy then waits in the gradient exchange), and in the
        // step after it.
        KillCase{"encoder.r1:start", 1,
                 "encoder stage of replica 1 killed by signal 9 \\(SIGKILL\\) during start-up "
                 "before step 2",
                 false, false, true},
        KillCase{"encoder.r1:backward:3", 1,
                 "encoder stage of replica 1 killed by signal 9 \\(SIGKILL\\) during encoder.r1 "
                 "turn \\[B0 B1 S\\] of step 3",
                 false, false, true},
        KillCase{"decoder.r1:step:3", 1,
                 "decoder stage of replica 1 killed by signal 9 \\(SIGKILL\\) during decoder.r1 "
                 "turn \\[FB0 FB1 S\\] of step 3",
                 false, false, true}),
    [](const auto& info) {
      std::string name = info.param.hook;
      for (char& ch : name) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
      return name + (info.param.parts ? "_of_six" : "") + (info.param.offload ? "_offloaded" : "") +
             (info.param.replicas ? "_of_two_replicas" : "");
    });

// A hung stage (SIGSTOP) is reported at pipeline.timeout_s with what it was
// doing, and killed; nothing of the run remains.
struct HangCase {
  const char* hook;
  const char* says;
  bool parts = false;     // a six-stage run (pipeline.encoder_parts/decoder_parts 3)
  bool replicas = false;  // two replicas (pipeline.replicas: 2)
};
class HangAnywhere : public ::testing::TestWithParam<HangCase> {};

TEST_P(HangAnywhere, ReportedAtTheTimeoutWithWhatItWasDoing) {
  const HangCase c = GetParam();
  TempDir dir;
  const std::string run = dir / "run";
  std::vector<std::string> args{
      "--config", SourcePath("configs/tiny.yaml"), "--out", run, "--set", "train.steps=3",
      "--set",    "pipeline.timeout_s=3"};
  if (c.parts)
    args.insert(args.end(),
                {"--set", "pipeline.encoder_parts=3", "--set", "pipeline.decoder_parts=3"});
  if (c.replicas) args.insert(args.end(), {"--set", "pipeline.replicas=2"});
  BackgroundCommand hung(Train(run, "UP_TEST_HANG_AT", c.hook, args));
  const int launcher_pid = hung.pid();
  const auto start = std::chrono::steady_clock::now();
  CommandResult r = hung.Wait(60);
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(
      std::regex_search(r.output, std::regex(std::string("unet-pipeline: error: ") + c.says)))
      << r.output;
  EXPECT_LT(took, 20) << "a 3 s timeout took " << took << " s";
  EXPECT_TRUE(NoProcessesWithin(run, 0)) << "the hung stage is still there";
  EXPECT_TRUE(Leftovers(launcher_pid).empty());
}

INSTANTIATE_TEST_SUITE_P(
    Points, HangAnywhere,
    ::testing::Values(
        HangCase{"decoder:forward:2",
                 "decoder did not answer within 3 s during decoder turn \\[FB0 FB1 S\\] of step 2 "
                 "\\(pipeline.timeout_s; raise it where a turn computes longer\\)"},
        HangCase{"encoder:start",
                 "encoder did not connect and say hello within 3 s during start-up before step 1 "
                 "\\(pipeline.timeout_s\\)"},
        // A middle part of a six-stage run.
        HangCase{"decoder2:forward:2",
                 "decoder2 did not answer within 3 s during decoder2 turn \\[.*\\] "
                 "of step 2 \\(pipeline.timeout_s; raise it where a turn computes longer\\)",
                 true},
        // A stage of replica 1 hung while replica 0's copy waits for its
        // gradients: the launcher names the hung one.
        // Replica 0's copy waits in the gradient exchange meanwhile, so it
        // does not answer either: both are named.
        HangCase{"decoder.r1:forward:2",
                 "decoder and decoder.r1 did not answer within 3 s during decoder turn \\[FB0 FB1 "
                 "S\\] of step 2, decoder.r1 turn \\[FB0 FB1 S\\] of step 2 "
                 "\\(pipeline.timeout_s; raise it where a turn computes longer\\)",
                 false, true}),
    [](const auto& info) {
      std::string name = info.param.hook;
      for (char& ch : name) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
      return name + (info.param.parts ? "_of_six" : "") +
             (info.param.replicas ? "_of_two_replicas" : "");
    });

// While a run is alive its shared memory (the rings and the device total) and
// its socket are owner-only and
// carry a 128-bit random run id in their names; a double Ctrl-C still removes
// them.
TEST(RunResources, OwnerOnlyWithUnguessableNamesAndRemovedAtOnceStop) {
  TempDir dir;
  const std::string run = dir / "run";
  BackgroundCommand held(Train(run, "UP_TEST_HANG_AT", "decoder:hello",
                               {"--config", SourcePath("configs/tiny.yaml"), "--out", run, "--set",
                                "train.steps=3", "--set", "pipeline.timeout_s=60"}));
  const int launcher_pid = held.pid();
  std::vector<std::string> found;
  for (int i = 0; i < 600 && found.size() < 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    found = Leftovers(launcher_pid);
  }
  ASSERT_EQ(found.size(), 4u)
      << "expected three segments (two rings, the CPU device's tensor total) and a socket folder";
  const std::regex name("up-" + std::to_string(launcher_pid) +
                        "-[0-9a-f]{32}(-0to1-fwd|-0to1-bwd|-budget|-......)");
  for (const std::string& path : found) {
    EXPECT_TRUE(std::regex_match(fs::path(path).filename().string(), name)) << path;
    struct stat st {};
    ASSERT_EQ(stat(path.c_str(), &st), 0) << path;
    if (S_ISDIR(st.st_mode)) {
      EXPECT_EQ(st.st_mode & 0777, 0700u) << path;
      struct stat sock {};
      ASSERT_EQ(stat((path + "/control.sock").c_str(), &sock), 0);
      EXPECT_TRUE(S_ISSOCK(sock.st_mode));
      EXPECT_EQ(sock.st_mode & 0777, 0600u);
    } else {
      EXPECT_EQ(st.st_mode & 0777, 0600u) << path;
    }
  }
  // Both stages up and the decoder stopped at its hook: the launcher now
  // watches them, so a second Ctrl-C stops the run at once.
  bool stopped = false;
  for (int i = 0; i < 1200 && !stopped; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    for (int pid : ProcessesMentioning(run + "/config.yaml")) {
      const std::string stat = Slurp("/proc/" + std::to_string(pid) + "/stat");
      const size_t paren = stat.rfind(')');
      stopped = stopped || (paren != std::string::npos && stat.substr(paren + 2, 1) == "T");
    }
  }
  ASSERT_TRUE(stopped) << "the decoder never reached its hook";
  kill(launcher_pid, SIGINT);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // signals do not queue
  kill(launcher_pid, SIGINT);
  CommandResult r = held.Wait(60);
  EXPECT_EQ(r.exit_code, 130) << r.output;
  EXPECT_TRUE(NoProcessesWithin(run, 0));
  EXPECT_TRUE(Leftovers(launcher_pid).empty());
}

}  // namespace
}  // namespace up::test
