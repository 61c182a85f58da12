// pipeline.replicas (issue 30), as a user runs it: R copies of the pipeline,
// each a set of real stage processes on its own rings, every stage's copies
// summing their gradients over a real Gloo group on loopback. Training equals
// `--single-process` of the whole batch bit for bit (param_digest) for any R,
// cut, schedule, recompute and clipping; resume goes on with another R; a
// stage of one replica that dies stops the run with one line naming it and
// leaves nothing; a batch the replicas cannot share is one error line.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/command.h"
#include "tests/support/training_checks.h"

namespace up::test {
namespace {

namespace fs = std::filesystem;

CommandResult Train(std::vector<std::string> args, std::vector<std::string> env = {}) {
  args.insert(args.begin(), {BinPath("unet-pipeline"), "train"});
  if (!env.empty()) {
    env.insert(env.begin(), "/usr/bin/env");
    args.insert(args.begin(), env.begin(), env.end());
  }
  return RunCommand(args);
}

// The tiny 2-D U-Net with instance norm: no running statistics, which each
// replica keeps for itself (as DDP does) where BatchNorm has them.
std::vector<std::string> Args(const std::string& out, const std::vector<std::string>& keys) {
  std::vector<std::string> args{
      "--config", SourcePath("configs/tiny.yaml"), "--out", out, "--set", "model.norm=instance"};
  for (const std::string& k : keys) args.insert(args.end(), {"--set", k});
  return args;
}

struct Shape {
  int replicas;
  int encoder_parts;
  int decoder_parts;
  int batch_size;
};

class ReplicasEqualSingleProcess : public ::testing::TestWithParam<Shape> {};

TEST_P(ReplicasEqualSingleProcess, EverySchedule) {
  const Shape shape = GetParam();
  TempDir dir;
  const std::vector<std::string> common{"train.steps=3", "train.grad_clip=0.5",
                                        "train.micro_batches=2",
                                        "train.batch_size=" + std::to_string(shape.batch_size),
                                        "pipeline.replicas=" + std::to_string(shape.replicas)};
  std::vector<std::string> single = Args(dir / "single", common);
  single.insert(single.begin(), "--single-process");
  CommandResult r = Train(single);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string reference = RunDigest(dir / "single");
  ASSERT_EQ(reference.size(), 64u);
  struct Variant {
    const char* name;
    std::vector<std::string> keys;
  };
  const std::vector<Variant> variants{
      {"sequential", {}},
      {"gpipe", {"pipeline.schedule=gpipe", "pipeline.lock=off"}},
      {"1f1b-recompute",
       {"pipeline.schedule=1f1b", "pipeline.lock=off", "pipeline.activations=recompute"}},
  };
  for (const Variant& v : variants) {
    std::vector<std::string> keys = common;
    keys.push_back("pipeline.encoder_parts=" + std::to_string(shape.encoder_parts));
    keys.push_back("pipeline.decoder_parts=" + std::to_string(shape.decoder_parts));
    keys.insert(keys.end(), v.keys.begin(), v.keys.end());
    r = Train(Args(dir / v.name, keys));
    ASSERT_EQ(r.exit_code, 0) << v.name << "\n" << r.output;
    EXPECT_EQ(RunDigest(dir / v.name), reference) << v.name << "\n" << r.output;
    ExpectNothingLeft(dir / v.name);
  }
  // One copy of each stage's file (replica 0's); every process logs apart.
  const std::string run = dir / "gpipe";
  EXPECT_EQ(JsonField(Slurp(run + "/summary.json"), "replicas"), std::to_string(shape.replicas));
  int files = 0;
  for (const auto& e : fs::directory_iterator(run + "/checkpoints/step-3"))
    files += e.path().extension() == ".pt";
  EXPECT_EQ(files, shape.encoder_parts + shape.decoder_parts);
  const std::string encoder = shape.encoder_parts == 1 ? "encoder" : "encoder1";
  for (int k = 1; k < shape.replicas; ++k)
    EXPECT_TRUE(fs::exists(run + "/" + encoder + ".r" + std::to_string(k) + ".log")) << k;
}

INSTANTIATE_TEST_SUITE_P(Shapes, ReplicasEqualSingleProcess,
                         ::testing::Values(Shape{2, 1, 1, 8}, Shape{3, 1, 1, 12},
                                           Shape{2, 2, 2, 8}),
                         [](const auto& info) {
                           return "r" + std::to_string(info.param.replicas) + "e" +
                                  std::to_string(info.param.encoder_parts) + "d" +
                                  std::to_string(info.param.decoder_parts);
                         });

// Two replicas trained two steps, then one replica to step 4, equal a
// single process that does the same; and back from one to two.
TEST(Replicas, ResumeWithAnotherReplicaCount) {
  TempDir dir;
  const std::vector<std::string> first{"train.steps=2", "checkpoint.every=1", "train.batch_size=8",
                                       "pipeline.replicas=2"};
  for (const char* mode : {"pipe", "single"}) {
    const std::string run = dir / mode;
    std::vector<std::string> args = Args(run, first);
    if (std::string(mode) == "single") args.insert(args.begin(), "--single-process");
    CommandResult r = Train(args);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    std::vector<std::string> more{"--resume",      run,     "--set",
                                  "train.steps=4", "--set", "pipeline.replicas=1"};
    if (std::string(mode) == "single") more.insert(more.begin(), "--single-process");
    r = Train(more);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    more = {"--resume", run, "--set", "train.steps=5", "--set", "pipeline.replicas=2"};
    if (std::string(mode) == "single") more.insert(more.begin(), "--single-process");
    r = Train(more);
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  EXPECT_EQ(RunDigest(dir / "pipe"), RunDigest(dir / "single"));
  ExpectNothingLeft(dir / "pipe");
}

// nnU-Net's U-Net (instance norm, deep supervision, Dice + CE) in fp16 with
// an initial loss scale it overflows at: the replicas skip, back off and
// clip exactly as one process does (the exchange gives every copy the same
// gradient bits, so every copy reaches the same verdict).
TEST(Replicas, Fp16NnunetWithDeepSupervisionEqualsSingleProcess) {
  TempDir dir;
  auto args = [&](const std::string& out) {
    std::vector<std::string> a{"--config", SourcePath("configs/nnunet-tiny.yaml"), "--out", out};
    for (const char* k : {"train.steps=6", "train.micro_batches=1", "pipeline.replicas=2",
                          "train.precision=fp16", "train.loss_scale.init=262144",
                          "train.loss_scale.growth_interval=2", "train.grad_clip=12"})
      a.insert(a.end(), {"--set", k});
    return a;
  };
  std::vector<std::string> single = args(dir / "single");
  single.insert(single.begin(), "--single-process");
  CommandResult r = Train(single);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::vector<std::string> pipe = args(dir / "pipe");
  pipe.insert(pipe.end(), {"--set", "pipeline.schedule=1f1b", "--set", "pipeline.lock=off"});
  r = Train(pipe);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(RunDigest(dir / "pipe"), RunDigest(dir / "single"));
  auto history = [](const std::string& run) {
    std::string out;
    std::istringstream lines(Slurp(run + "/metrics.jsonl"));
    for (std::string line; std::getline(lines, line);)
      out += JsonField(line, "loss_scale") + "/" + JsonField(line, "skipped") + " ";
    return out;
  };
  EXPECT_EQ(history(dir / "pipe"), history(dir / "single"));
  EXPECT_NE(history(dir / "single").find("true"), std::string::npos)
      << "no step overflowed: " << history(dir / "single");
  ExpectNothingLeft(dir / "pipe");
}

TEST(Replicas, AStageOfOneReplicaDyingStopsEveryProcess) {
  TempDir dir;
  const std::string run = dir / "run";
  std::vector<std::string> args =
      Args(run, {"train.steps=3", "checkpoint.every=1", "pipeline.replicas=2"});
  args.insert(args.begin(), {"/usr/bin/env", "UP_TEST_KILL_AT=decoder.r1:backward:2",
                             BinPath("unet-pipeline"), "train"});
  BackgroundCommand killed(args);  // env runs the launcher in its own process
  const int launcher_pid = killed.pid();
  CommandResult r = killed.Wait(120);
  ASSERT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("decoder stage of replica 1 killed by signal 9"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("--resume"), std::string::npos) << r.output;
  // No stage of either replica, no ring, no socket folder.
  EXPECT_TRUE(ProcessesMentioning(run + "/config.yaml").empty());
  const std::string prefix = "up-" + std::to_string(launcher_pid) + "-";
  for (const char* folder : {"/dev/shm", "/tmp"}) {
    for (const auto& e : fs::directory_iterator(folder))
      EXPECT_NE(e.path().filename().string().rfind(prefix, 0), 0u) << e.path();
  }
  // Step 1's checkpoint is intact: the run goes on to the same end.
  r = Train({"--resume", run});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = Train(Args(dir / "whole", {"train.steps=3", "checkpoint.every=1", "pipeline.replicas=2"}));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(RunDigest(run), RunDigest(dir / "whole"));
}

TEST(Replicas, ABatchTheReplicasCannotShareIsOneErrorLine) {
  TempDir dir;
  const CommandResult r = Train(
      Args(dir / "run", {"train.batch_size=8", "train.micro_batches=2", "pipeline.replicas=3"}));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  const std::vector<std::string> errors = ErrorLines(r.output);
  ASSERT_EQ(errors.size(), 1u) << r.output;
  EXPECT_NE(errors[0].find("pipeline.replicas x train.micro_batches (3 x 2 = 6)"),
            std::string::npos)
      << errors[0];
  EXPECT_FALSE(fs::exists(dir / "run"));
}

}  // namespace
}  // namespace up::test
