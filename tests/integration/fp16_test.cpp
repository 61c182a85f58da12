// train.precision: fp16 with the dynamic loss scale, as a user runs it: the
// pipeline equals --single-process bit for bit with every schedule and
// micro-batch count, also when the scale overflows (skipped steps, backoff
// and growth all happen within six steps at an initial scale of 2^18 with a
// growth interval of 2), and resuming in the middle of a growth interval
// continues exactly as an uninterrupted run.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "tests/support/command.h"

namespace up::test {
namespace {

CommandResult Train(std::vector<std::string> args) {
  args.insert(args.begin(), {BinPath("unet-pipeline"), "train"});
  return RunCommand(args);
}

// An initial scale the tiny U-Net overflows at after its first growth, so one
// short run skips steps, backs off and grows again.
const std::vector<std::string> kFp16 = {"--set", "train.precision=fp16",
                                        "--set", "train.loss_scale.init=262144",
                                        "--set", "train.loss_scale.growth_interval=2"};

std::string TrainFp16(const TempDir& dir, const std::string& out, int steps,
                      std::vector<std::string> extra) {
  std::vector<std::string> args{"--config", SourcePath("configs/tiny.yaml"),
                                "--set",    "train.steps=" + std::to_string(steps),
                                "--out",    dir / out};
  args.insert(args.end(), kFp16.begin(), kFp16.end());
  args.insert(args.end(), extra.begin(), extra.end());
  CommandResult r = Train(args);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return RunDigest(dir / out);
}

// "scale/skipped" of every step in the run's metrics.jsonl, in order.
std::vector<std::string> ScaleHistory(const std::string& run) {
  std::vector<std::string> history;
  std::istringstream lines(Slurp(run + "/metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    history.push_back(JsonField(line, "loss_scale") + "/" + JsonField(line, "skipped"));
  }
  return history;
}

TEST(Fp16, OverflowSkipsAndBacksOffAlikeInEveryTrainer) {
  TempDir dir;
  const std::string single = TrainFp16(dir, "single", 6, {"--single-process"});
  const std::vector<std::string> history = ScaleHistory(dir / "single");
  ASSERT_EQ(history.size(), 6u);
  // The scale grew (262144 -> 524288 after two finite steps), overflowed
  // there, and backed off: the run exercised every branch.
  EXPECT_EQ(history[0], "262144/false");
  EXPECT_EQ(history[2], "524288/true");
  EXPECT_EQ(history[3], "262144/false");
  for (const std::string schedule : {"sequential", "gpipe", "1f1b"}) {
    const std::string out = "pipe-" + schedule;
    // Overlapped schedules run the stages at once: no turns (pipeline.lock off).
    EXPECT_EQ(TrainFp16(dir, out, 6,
                        {"--set", "pipeline.schedule=" + schedule, "--set", "pipeline.lock=off"}),
              single)
        << schedule;
    EXPECT_EQ(ScaleHistory(dir / out), history) << schedule;
  }
  EXPECT_NE(Slurp(dir / "single/metrics.jsonl").find("\"skipped_steps\":2"), std::string::npos);
}

TEST(Fp16, MicroBatchesAndRecomputeEqualSingleProcess) {
  TempDir dir;
  // Tiny's 2 micro-batches a step are the other fp16 tests' pipeline, one
  // a step Replicas.Fp16NnunetWithDeepSupervisionEqualsSingleProcess's.
  for (const std::string mb : {"4"}) {
    const std::vector<std::string> sets{"--set", "train.micro_batches=" + mb};
    std::vector<std::string> single_args = sets;
    single_args.push_back("--single-process");
    const std::string single = TrainFp16(dir, "single" + mb, 4, single_args);
    std::vector<std::string> recompute = sets;
    recompute.insert(recompute.end(),
                     {"--set", "pipeline.activations=recompute", "--set", "pipeline.schedule=1f1b",
                      "--set", "pipeline.lock=off", "--set", "train.grad_clip=0.5"});
    std::vector<std::string> clipped_single = single_args;
    clipped_single.insert(clipped_single.end(), {"--set", "train.grad_clip=0.5"});
    EXPECT_EQ(TrainFp16(dir, "pipe" + mb, 4, sets), single) << "micro_batches " << mb;
    EXPECT_EQ(TrainFp16(dir, "recompute" + mb, 4, recompute),
              TrainFp16(dir, "clipped" + mb, 4, clipped_single))
        << "micro_batches " << mb;
  }
}

TEST(Fp16, ResumeInTheMiddleOfAGrowthIntervalIsExact) {
  TempDir dir;
  // After step 4 the scale has seen one finite step of its interval of two:
  // a resume that lost the counter would not grow before step 6 and would
  // not skip it.
  for (const std::string mode : {"pipeline", "single"}) {
    std::vector<std::string> extra;
    if (mode == "single") extra.push_back("--single-process");
    const std::string straight = TrainFp16(dir, mode + "-straight", 6, extra);
    TrainFp16(dir, mode + "-resumed", 4, extra);
    std::vector<std::string> resume{"--resume", dir / (mode + "-resumed"), "--set",
                                    "train.steps=6"};
    resume.insert(resume.end(), extra.begin(), extra.end());
    CommandResult r = Train(resume);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(RunDigest(dir / (mode + "-resumed")), straight) << mode;
    EXPECT_EQ(ScaleHistory(dir / (mode + "-resumed")), ScaleHistory(dir / (mode + "-straight")))
        << mode;
  }
}

TEST(Fp16, ChangesTheArithmeticAndNeedsAPositiveScale) {
  TempDir dir;
  const std::string fp16 = TrainFp16(dir, "fp16", 2, {"--single-process"});
  CommandResult r = Train({"--single-process", "--config", SourcePath("configs/tiny.yaml"), "--set",
                           "train.steps=2", "--out", dir / "fp32"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(RunDigest(dir / "fp32"), fp16) << "fp16 autocast must change the arithmetic";
  EXPECT_EQ(JsonField(Slurp(dir / "fp32/metrics.jsonl"), "loss_scale"), "")
      << "fp32 runs carry no loss scale";
  r = Train({"--single-process", "--config", SourcePath("configs/tiny.yaml"), "--set",
             "train.precision=fp16", "--set", "train.loss_scale.init=0", "--out", dir / "bad"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("train.loss_scale.init"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace up::test
