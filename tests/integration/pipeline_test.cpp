// The pipeline as a user runs it: `unet-pipeline train` starts encoder_proc
// and decoder_proc, and the result must equal `--single-process` bit for bit
// (param_digest), for 2-D and 3-D and several micro-batch counts; nothing of
// the run (process, shared-memory segment, socket folder) may remain.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/support/command.h"
#include "tests/support/training_checks.h"

namespace up::test {
namespace {

namespace fs = std::filesystem;

CommandResult Train(std::vector<std::string> args) {
  args.insert(args.begin(), {BinPath("unet-pipeline"), "train"});
  return RunCommand(args);
}

struct Case {
  const char* config;
  int micro_batches;
  int steps;
};

class PipelineEqualsSingleProcess : public ::testing::TestWithParam<Case> {};

TEST_P(PipelineEqualsSingleProcess, SameParamDigest) {
  const Case c = GetParam();
  TempDir dir;
  const std::vector<std::string> sets = {"--set",
                                         "train.micro_batches=" + std::to_string(c.micro_batches),
                                         "--set", "train.steps=" + std::to_string(c.steps)};
  std::vector<std::string> pipe{"--config", SourcePath(c.config), "--out", dir / "pipe"};
  pipe.insert(pipe.end(), sets.begin(), sets.end());
  std::vector<std::string> single{"--single-process", "--config", SourcePath(c.config), "--out",
                                  dir / "single"};
  single.insert(single.end(), sets.begin(), sets.end());
  CommandResult p = Train(pipe);
  ASSERT_EQ(p.exit_code, 0) << p.output;
  CommandResult s = Train(single);
  ASSERT_EQ(s.exit_code, 0) << s.output;
  EXPECT_EQ(RunDigest(dir / "pipe"), RunDigest(dir / "single"));
  EXPECT_EQ(RunDigest(dir / "pipe").size(), 64u);
  EXPECT_EQ(
      Slurp(dir / "pipe/checkpoints/step-" + std::to_string(c.steps) + "/manifest.json").empty(),
      false);
  const std::string summary = Slurp(dir / "pipe/summary.json");
  for (const char* who : {"launcher", "encoder", "decoder"}) {
    EXPECT_NE(JsonField(summary, "peak_rss_bytes").find(who), std::string::npos) << summary;
  }
  EXPECT_NE(p.output.find("device turns"), std::string::npos) << p.output;
  ExpectNothingLeft(dir / "pipe");
}

INSTANTIATE_TEST_SUITE_P(Configs, PipelineEqualsSingleProcess,
                         ::testing::Values(Case{"configs/tiny.yaml", 1, 6},
                                           Case{"configs/tiny.yaml", 2, 20},
                                           Case{"configs/tiny.yaml", 4, 6},
                                           Case{"configs/tiny3d.yaml", 1, 3},
                                           Case{"configs/tiny3d.yaml", 4, 3}),
                         [](const auto& info) {
                           return std::string(fs::path(info.param.config).stem()) + "_mb" +
                                  std::to_string(info.param.micro_batches);
                         });

TEST(Pipeline, ClippingAndOverlappedSchedulesEqualSingleProcess) {
  TempDir dir;
  const std::string config = SourcePath("configs/tiny.yaml");
  const std::vector<std::string> common = {
      "--config", config,          "--set", "train.micro_batches=4",
      "--set",    "train.steps=5", "--set", "train.grad_clip=0.5"};
  auto run = [&](const std::string& out, std::vector<std::string> extra) {
    extra.insert(extra.end(), common.begin(), common.end());
    extra.insert(extra.end(), {"--out", dir / out});
    CommandResult r = Train(extra);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return RunDigest(dir / out);
  };
  const std::string reference = run("single", {"--single-process"});
  EXPECT_EQ(run("sequential", {}), reference);
  EXPECT_EQ(run("gpipe", {"--set", "pipeline.lock=off", "--set", "pipeline.schedule=gpipe"}),
            reference);
  EXPECT_EQ(run("1f1b", {"--set", "pipeline.lock=off", "--set", "pipeline.schedule=1f1b"}),
            reference);
}

TEST(Pipeline, ResumeContinuesToTheSameDigest) {
  TempDir dir;
  const std::string config = SourcePath("configs/tiny.yaml");
  ASSERT_EQ(Train({"--single-process", "--config", config, "--set", "train.steps=8", "--out",
                   dir / "straight"})
                .exit_code,
            0);
  ASSERT_EQ(Train({"--config", config, "--set", "train.steps=4", "--out", dir / "pipe"}).exit_code,
            0);
  CommandResult r = Train({"--resume", dir / "pipe", "--set", "train.steps=8"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(RunDigest(dir / "pipe"), RunDigest(dir / "straight"));
  ExpectNothingLeft(dir / "pipe");
}

TEST(Pipeline, RecomputeAndParkingEqualKeepWithBatchNorm) {
  // tiny uses BatchNorm: recompute must leave its running statistics exactly
  // as keep does, and parking must not change a bit.
  TempDir dir;
  const std::vector<std::string> common = {"--config", SourcePath("configs/tiny.yaml"),
                                           "--set",    "train.micro_batches=4",
                                           "--set",    "train.steps=5"};
  auto run = [&](const std::string& out, std::vector<std::string> extra) {
    extra.insert(extra.end(), common.begin(), common.end());
    extra.insert(extra.end(), {"--out", dir / out});
    CommandResult r = Train(extra);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return RunDigest(dir / out);
  };
  const std::string keep = run("keep", {});
  EXPECT_EQ(run("single", {"--single-process"}), keep);
  EXPECT_EQ(run("recompute", {"--set", "pipeline.activations=recompute"}), keep);
  EXPECT_EQ(
      run("parked", {"--set", "pipeline.park=always", "--set", "pipeline.activations=recompute"}),
      keep);
  // Block by block, in the pipeline and in one process.
  EXPECT_EQ(run("blocks", {"--set", "pipeline.activations=recompute", "--set",
                           "pipeline.recompute_unit=block"}),
            keep);
  EXPECT_EQ(run("single-blocks", {"--single-process", "--set", "train.checkpointing=blocks"}),
            keep);
  // What recompute keeps, parked in host memory until its backward.
  EXPECT_EQ(run("offload", {"--set", "pipeline.activations=recompute", "--set",
                            "pipeline.recompute_unit=block", "--set", "pipeline.offload=on"}),
            keep);
  // Offloaded, F parks each micro-batch's units and B frees only its own:
  // micro-batches in flight (1f1b over 3 stages) and 4 parts in turns.
  const std::vector<std::string> offload{"--set", "pipeline.activations=recompute",
                                         "--set", "pipeline.recompute_unit=block",
                                         "--set", "pipeline.offload=on"};
  auto with = [&](std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  EXPECT_EQ(run("offload-1f1b",
                with(offload, {"--set", "pipeline.schedule=1f1b", "--set", "pipeline.lock=off",
                               "--set", "pipeline.encoder_parts=2"})),
            keep);
  EXPECT_EQ(run("offload-4", with(offload, {"--set", "pipeline.encoder_parts=2", "--set",
                                            "pipeline.decoder_parts=2"})),
            keep);
  EXPECT_EQ(run("single-offload", {"--single-process", "--set", "train.checkpointing=levels",
                                   "--set", "train.offload=on"}),
            keep);
  // The next stage fetching its parked state before its turn changes nothing.
  EXPECT_EQ(run("prefetched", {"--set", "pipeline.park=always", "--set", "pipeline.prefetch=on"}),
            keep);
}

TEST(Pipeline, Bf16AutocastEqualsSingleProcessAndDiffersFromFp32) {
  TempDir dir;
  const std::string config = SourcePath("configs/tiny.yaml");
  auto run = [&](const std::string& out, const std::string& precision,
                 std::vector<std::string> extra) {
    std::vector<std::string> args{"--config",      config,   "--set",
                                  "train.steps=4", "--set",  "train.precision=" + precision,
                                  "--out",         dir / out};
    args.insert(args.end(), extra.begin(), extra.end());
    CommandResult r = Train(args);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return RunDigest(dir / out);
  };
  const std::string single = run("single", "bf16", {"--single-process"});
  EXPECT_EQ(run("pipe", "bf16", {}), single);
  EXPECT_EQ(run("recompute", "bf16", {"--set", "pipeline.activations=recompute"}), single);
  EXPECT_NE(run("fp32", "fp32", {"--single-process"}), single) << "bf16 must change the arithmetic";
}

// model.memory: lean changes the arithmetic's order (so the bits), and the
// stages compute it as one process does, bit for bit; it trains in fp32.
TEST(Pipeline, LeanEqualsSingleProcessAndDiffersFromTheModelAsWritten) {
  TempDir dir;
  const std::string config = SourcePath("configs/tiny3d.yaml");
  auto run = [&](const std::string& out, std::vector<std::string> extra) {
    std::vector<std::string> args{"--config",      config,   "--set",
                                  "train.steps=3", "--set",  "train.micro_batches=2",
                                  "--out",         dir / out};
    args.insert(args.end(), extra.begin(), extra.end());
    CommandResult r = Train(args);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return RunDigest(dir / out);
  };
  const std::string single = run("single", {"--single-process", "--set", "model.memory=lean"});
  EXPECT_EQ(run("pipe", {"--set", "model.memory=lean", "--set", "pipeline.activations=recompute",
                         "--set", "pipeline.recompute_unit=block", "--set", "pipeline.offload=on"}),
            single);
  EXPECT_NE(run("written", {"--single-process"}), single) << "lean must change the order";
  const CommandResult bf16 = Train({"--config", config, "--set", "model.memory=lean", "--set",
                                    "train.precision=bf16", "--out", dir / "bf16"});
  EXPECT_EQ(bf16.exit_code, 2) << bf16.output;
  EXPECT_NE(bf16.output.find("model.memory"), std::string::npos) << bf16.output;
  EXPECT_NE(bf16.output.find("train.precision: fp32"), std::string::npos) << bf16.output;
  EXPECT_FALSE(fs::exists(dir / "bf16/checkpoints"));
}

TEST(Pipeline, CudaWithoutAGpuIsAClearError) {
  TempDir dir;
  CommandResult probe = RunCommand({BinPath("unet-pipeline"), "--version"});
  if (probe.output.find("CUDA devices visible: 0") == std::string::npos) {
    GTEST_SKIP() << "a CUDA device is visible here; this test checks the no-GPU error";
  }
  CommandResult r = Train({"--config", SourcePath("configs/tiny.yaml"), "--set",
                           "pipeline.stages.decoder.device=cuda", "--out", dir / "run"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("pipeline.stages.decoder.device = cuda"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir / "run")) << "a refused config leaves no run folder";
  r = Train({"--config", SourcePath("configs/tiny.yaml"), "--single-process", "--set",
             "pipeline.stages.encoder.device=cuda:1", "--out", dir / "run1"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("pipeline.stages.encoder.device = cuda:1"), std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(dir / "run1"));
  // Refused later, by the pipeline's own checks: the folder it made goes too,
  // while a folder the user had is kept.
  fs::create_directories(dir / "mine");
  r = Train({"--config", SourcePath("configs/tiny.yaml"), "--set", "pipeline.transport=cuda_ipc",
             "--out", dir / "run2"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("cuda_ipc"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir / "run2"));
  r = Train({"--config", SourcePath("configs/tiny.yaml"), "--set", "pipeline.transport=cuda_ipc",
             "--out", dir / "mine"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(fs::exists(dir / "mine"));
}

TEST(Pipeline, AutoDeviceSaysWhichAndWhy) {
  // ctest hides GPUs from every test but the gpu-labelled ones: auto is the CPU.
  TempDir dir;
  CommandResult r =
      Train({"--config", SourcePath("configs/tiny.yaml"), "--set", "train.steps=1", "--set",
             "data.samples=2", "--set", "train.micro_batches=1", "--out", dir / "run"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const size_t note = r.output.find("device auto: cpu (");
  ASSERT_NE(note, std::string::npos) << r.output;
  EXPECT_LT(note, r.output.find("run folder")) << "the first line says which device and why";
  std::ifstream f(dir / "run/config.yaml");
  const std::string dumped((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_NE(dumped.find("device: \"cpu\""), std::string::npos) << "the run records the device";
  EXPECT_EQ(dumped.find("device: \"auto\""), std::string::npos) << dumped;
}

TEST(Plan, AnswersTheSixteenGiBQuestionForBrats16g) {
  CommandResult r =
      RunCommand({BinPath("unet-pipeline"), "plan", "--config", SourcePath("configs/brats16g.yaml"),
                  "--gpu-mem", "16GiB", "--json", "--no-measure"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\"name\":\"single-process\""), std::string::npos) << r.output;
  const size_t single = r.output.find("\"name\":\"single-process\"");
  const size_t offload = r.output.find("\"name\":\"pipeline offload\"");
  ASSERT_NE(offload, std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\"fits\":false", single), std::string::npos);
  EXPECT_NE(r.output.find("\"fits\":true", offload), std::string::npos) << r.output;
  CommandResult table = RunCommand({BinPath("unet-pipeline"), "plan", "--config",
                                    SourcePath("configs/brats16g.yaml"), "--no-measure"});
  EXPECT_EQ(table.exit_code, 0);
  EXPECT_NE(table.output.find("NO"), std::string::npos) << table.output;
  EXPECT_EQ(RunCommand({BinPath("unet-pipeline"), "plan", "--config",
                        SourcePath("configs/tiny.yaml"), "--gpu-mem", "lots"})
                .exit_code,
            2);
}

TEST(Pipeline, OverlappedScheduleOnASharedDeviceIsRefused) {
  TempDir dir;
  CommandResult r = Train({"--config", SourcePath("configs/tiny.yaml"), "--set",
                           "pipeline.schedule=gpipe", "--out", dir / "run"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("pipeline.lock: off"), std::string::npos) << r.output;
}

TEST(Pipeline, MissingStageBinaryIsAClearError) {
  TempDir dir;
  fs::copy_file(BinPath("unet-pipeline"), dir / "unet-pipeline");
  CommandResult r = RunCommand({dir / "unet-pipeline", "train", "--config",
                                SourcePath("configs/tiny.yaml"), "--out", dir / "run"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("encoder_proc"), std::string::npos) << r.output;
}

TEST(Pipeline, KilledStageEndsTheRunCleanly) {
  TempDir dir;
  const std::string run = dir / "run";
  CommandResult result;
  std::thread launcher([&] {
    result = Train(
        {"--config", SourcePath("configs/tiny.yaml"), "--set", "train.steps=100000", "--out", run});
  });
  // Wait for the encoder to be training, then kill it.
  std::vector<int> victims;
  for (int i = 0; i < 300 && victims.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (Slurp(run + "/metrics.jsonl").empty()) continue;
    for (int pid : ProcessesMentioning(run + "/config.yaml")) {
      if (Slurp("/proc/" + std::to_string(pid) + "/cmdline").find("encoder_proc") !=
          std::string::npos) {
        victims.push_back(pid);
      }
    }
  }
  ASSERT_FALSE(victims.empty()) << "the encoder never started training";
  const auto killed_at = std::chrono::steady_clock::now();
  kill(victims[0], SIGKILL);
  launcher.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("encoder stage killed by signal 9"), std::string::npos)
      << result.output;
  EXPECT_LT(seconds, 10.0) << "the launcher should notice at once";
  EXPECT_TRUE(ProcessesMentioning(run + "/config.yaml").empty())
      << "the decoder must not outlive the run";
  const size_t at = result.output.find("run id ");
  ASSERT_NE(at, std::string::npos) << result.output;
  const std::string id = result.output.substr(at + 7, 32);
  for (const char* folder : {"/dev/shm", "/tmp"}) {
    for (const auto& e : fs::directory_iterator(folder)) {
      EXPECT_EQ(e.path().filename().string().find(id), std::string::npos)
          << "leftover " << e.path();
    }
  }
}

TEST(Pipeline, KilledLauncherTakesItsStagesAlongAndTheNextRunCleansUp) {
  TempDir dir;
  const std::string run = dir / "run";
  BackgroundCommand launcher({BinPath("unet-pipeline"), "train", "--config",
                              SourcePath("configs/tiny.yaml"), "--set", "train.steps=100000",
                              "--out", run});
  for (int i = 0; i < 300 && Slurp(run + "/metrics.jsonl").empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_FALSE(ProcessesMentioning(run + "/config.yaml").empty());
  kill(launcher.pid(), SIGKILL);
  const std::string output = launcher.Wait().output;
  const size_t at = output.find("run id ");
  ASSERT_NE(at, std::string::npos) << output;
  const std::string id = output.substr(at + 7, 32);
  bool gone = false;
  for (int i = 0; i < 50 && !gone; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    gone = ProcessesMentioning(run + "/config.yaml").empty();
  }
  EXPECT_TRUE(gone) << "stages must exit when their launcher dies";
  // Its segments are left behind; the next run (this one, or any other
  // started meanwhile) removes them.
  CommandResult next = Train({"--config", SourcePath("configs/tiny.yaml"), "--set", "train.steps=1",
                              "--out", dir / "next"});
  EXPECT_EQ(next.exit_code, 0) << next.output;
  for (const char* folder : {"/dev/shm", "/tmp"}) {
    for (const auto& e : fs::directory_iterator(folder)) {
      EXPECT_EQ(e.path().filename().string().find(id), std::string::npos)
          << "leftover " << e.path();
    }
  }
}

}  // namespace
}  // namespace up::test
