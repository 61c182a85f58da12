// train.memory_budget: a CPU device behaves as a card of that size. Running
// out ends the run with exit 1 and one line naming the process, where in the
// step, the request, what was in use and the budget; the newest checkpoint
// stays, nothing is left behind, and a resume with a larger budget finishes
// as the uninterrupted run. A budget that single-process training cannot
// meet, the pipeline with recompute and parking meets, bit-identically to an
// unbudgeted run, and its device total stays within the budget.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "tests/support/command.h"

namespace up::test {
namespace {

namespace fs = std::filesystem;

CommandResult TrainQuiet(const std::vector<std::string>& extra) {
  std::vector<std::string> args{BinPath("unet-pipeline"), "train", "-q"};
  args.insert(args.end(), extra.begin(), extra.end());
  return RunCommand(args);
}

std::vector<std::string> Tiny(const std::string& out, int steps) {
  return {"--config", SourcePath("configs/tiny.yaml"),       "--out", out,
          "--set",    "train.steps=" + std::to_string(steps)};
}

std::vector<std::string> With(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// What of the run in `dir` is left in /dev/shm and /tmp (its run id is in launcher.log).
std::vector<std::string> Leftovers(const std::string& dir) {
  std::smatch m;
  const std::string log = Slurp(dir + "/launcher.log");
  std::vector<std::string> found;
  if (!std::regex_search(log, m, std::regex("run id ([0-9a-f]{32})"))) return found;
  for (const char* folder : {"/dev/shm", "/tmp"}) {
    for (const auto& e : fs::directory_iterator(folder)) {
      if (e.path().filename().string().find(m[1].str()) != std::string::npos)
        found.push_back(e.path().string());
    }
  }
  return found;
}

long long DeviceTotal(const std::string& run) {
  const std::string v =
      JsonField(JsonField(Slurp(run + "/summary.json"), "peak_device_tensor_bytes"), "cpu");
  EXPECT_FALSE(v.empty()) << Slurp(run + "/summary.json");
  return v.empty() ? 0 : std::stoll(v);
}

TEST(MemoryBudget, SingleProcessRunsOutAndResumesWithALargerBudget) {
  TempDir dir;
  const std::string run = dir / "run";
  // Two steps checkpointed, then a budget that holds the state (about 6 MiB)
  // but not step 3's activations.
  CommandResult first = TrainQuiet(With(Tiny(run, 2), {"--single-process"}));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  CommandResult oom = TrainQuiet({"--resume", run, "--single-process", "--set", "train.steps=4",
                                  "--set", "train.memory_budget=10MiB"});
  EXPECT_EQ(oom.exit_code, 1) << oom.output;
  const std::vector<std::string> errors = ErrorLines(oom.output);
  ASSERT_EQ(errors.size(), 1u) << oom.output;
  const std::string& line = errors[0];
  for (const char* piece : {"out of memory in the single-process trainer at step 3",
                            "micro-batch 0", "tried to allocate", "of the device's 10 MiB",
                            "train.checkpointing=levels", "checkpoint step-2 is intact"}) {
    EXPECT_NE(line.find(piece), std::string::npos) << piece << " missing from: " << line;
  }
  EXPECT_FALSE(fs::exists(run + "/checkpoints/step-3"));
  EXPECT_TRUE(fs::exists(run + "/checkpoints/step-2"));
  // A budget it fits in: the run finishes as the uninterrupted one.
  CommandResult resumed = TrainQuiet({"--resume", run, "--single-process", "--set", "train.steps=4",
                                      "--set", "train.memory_budget=64MiB"});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  CommandResult straight = TrainQuiet(With(Tiny(dir / "straight", 4), {"--single-process"}));
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  EXPECT_EQ(RunDigest(run), RunDigest(dir / "straight"));
  EXPECT_EQ(JsonField(Slurp(run + "/summary.json"), "memory_budget_bytes"),
            std::to_string(64 << 20));
}

TEST(MemoryBudget, AStageRunsOutWithOneLineAndLeavesNothing) {
  TempDir dir;
  CommandResult r = TrainQuiet(With(Tiny(dir / "run", 2), {"--set", "train.memory_budget=3MiB"}));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const std::vector<std::string> errors = ErrorLines(r.output);
  ASSERT_EQ(errors.size(), 1u) << r.output;
  const std::string& line = errors[0];
  EXPECT_TRUE(std::regex_search(
      line,
      std::regex("out of memory in the (encoder|decoder) stage at step 1, turn \\[[^\\]]+\\], "
                 "(micro-batch [0-9]|optimizer step)")))
      << line;
  EXPECT_NE(line.find("of the device's 3 MiB (train.memory_budget) in use"), std::string::npos)
      << line;
  EXPECT_NE(line.find("pipeline.activations=recompute"), std::string::npos) << line;
  EXPECT_TRUE(Leftovers(dir / "run").empty());
  EXPECT_TRUE(ProcessesMentioning(dir / "run").empty()) << "a stage outlived the run";
}

TEST(MemoryBudget, ThePipelineTrainsWhereSingleProcessRunsOut) {
  TempDir dir;
  // tiny in one process peaks near 19.7 MiB of tensors (13.9 with
  // checkpointing); the pipeline recomputing, its stages parked between
  // turns, near 8.2.
  const std::vector<std::string> budget{"--set", "train.memory_budget=12MiB"};
  CommandResult single =
      TrainQuiet(With(With(Tiny(dir / "single", 2), budget), {"--single-process"}));
  EXPECT_EQ(single.exit_code, 1) << single.output;
  CommandResult ckpt =
      TrainQuiet(With(With(Tiny(dir / "ckpt", 2), budget),
                      {"--single-process", "--set", "train.checkpointing=levels"}));
  EXPECT_EQ(ckpt.exit_code, 1) << ckpt.output;
  const std::vector<std::string> recompute{"--set", "pipeline.activations=recompute"};
  CommandResult fits = TrainQuiet(With(With(Tiny(dir / "fits", 2), budget), recompute));
  ASSERT_EQ(fits.exit_code, 0) << fits.output;
  EXPECT_LE(DeviceTotal(dir / "fits"), 12ll << 20);
  CommandResult free_run = TrainQuiet(With(Tiny(dir / "free", 2), recompute));
  ASSERT_EQ(free_run.exit_code, 0) << free_run.output;
  EXPECT_EQ(RunDigest(dir / "fits"), RunDigest(dir / "free"));
  // Parked between turns, the stages together hold less than without.
  EXPECT_LT(DeviceTotal(dir / "fits"), DeviceTotal(dir / "free"));
  // Parking really frees the device: between its turns the encoder holds at
  // most the inputs it recomputes from (a step's 8 images of 4x64x64 fp32),
  // the decoder next to nothing.
  const std::string residue = JsonField(Slurp(dir / "fits/summary.json"), "residue_tensor_bytes");
  ASSERT_FALSE(residue.empty()) << Slurp(dir / "fits/summary.json");
  EXPECT_LE(std::stoll(JsonField(residue, "encoder")), 8 * 4 * 64 * 64 * 4) << residue;
  EXPECT_LE(std::stoll(JsonField(residue, "decoder")), 64 << 10) << residue;
}

TEST(MemoryBudget, CheckpointingIsTheSingleProcessTrainers) {
  TempDir dir;
  CommandResult r = TrainQuiet(With(Tiny(dir / "run", 1), {"--set", "train.checkpointing=levels"}));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("pipeline.activations: recompute"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace up::test
