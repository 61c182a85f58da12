// Debugging a split run, as a user does it with the real binaries: record a
// run, replay each stage alone against it, catch a tampered recording, check
// the pipeline against single-process (and catch a perturbed decoder), trace
// a run, inspect a checkpoint, and load a recording in Python.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <filesystem>
#include <set>

#include "common/model/tensor_file.h"
#include "tests/support/command.h"

namespace up::test {
namespace {

namespace fs = std::filesystem;

const std::vector<std::string> kTiny2Steps = {"--config", SourcePath("configs/tiny.yaml"), "--set",
                                              "train.steps=2"};

// Trains tiny for 2 steps, recording every stage; returns the recording folder.
std::string Record(const TempDir& dir, const std::vector<std::string>& sets = {}) {
  std::vector<std::string> args{BinPath("unet-pipeline"), "train"};
  args.insert(args.end(), kTiny2Steps.begin(), kTiny2Steps.end());
  for (const std::string& s : sets) args.insert(args.end(), {"--set", s});
  args.insert(args.end(),
              {"--out", dir / "run", "--record", dir / "rec", "--record-steps", "2", "-q"});
  const CommandResult r = RunCommand(args, 120);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return dir / "rec";
}

TEST(Debug, EachStageReplaysItsRecordingExactly) {
  TempDir dir;
  const std::string rec = Record(dir);
  for (const char* file : {"index.json", "config.yaml", "fwd-s1-m1.pt", "bwd-s0-m0.pt",
                           "encoder-weights-s2.pt", "decoder-s0.stage"}) {
    EXPECT_TRUE(fs::exists(fs::path(rec) / file)) << file;
  }
  for (const char* stage : {"encoder_proc", "decoder_proc"}) {
    const CommandResult r = RunCommand({BinPath(stage), "--replay", rec}, 60);
    EXPECT_EQ(r.exit_code, 0) << stage << "\n" << r.output;
    EXPECT_NE(r.output.find("all within atol=0 rtol=0 (largest abs difference 0)"),
              std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("max_abs 0 "), std::string::npos) << r.output;
  }
}

TEST(Debug, ATamperedRecordingFailsReplayNamingTheTensor) {
  TempDir dir;
  const std::string rec = Record(dir);
  const std::string file = rec + "/fwd-s0-m0.pt";
  NamedTensors tensors = LoadTensorFile(file);
  ASSERT_EQ(tensors[2].first, "skip1");
  tensors[2].second.view(-1)[5].add_(1e-3);
  SaveTensorFile(file, tensors);
  const CommandResult r = RunCommand({BinPath("encoder_proc"), "--replay", rec}, 60);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("DIFF fwd-s0-m0:skip1"), std::string::npos) << r.output;
  // A tolerance larger than the change lets it pass.
  const CommandResult loose =
      RunCommand({BinPath("encoder_proc"), "--replay", rec, "--atol", "0.01"}, 60);
  EXPECT_EQ(loose.exit_code, 0) << loose.output;
}

TEST(Debug, CheckPassesOnTinyAndCatchesAPerturbedDecoder) {
  std::vector<std::string> args{BinPath("unet-pipeline"),        "check",   "--config",
                                SourcePath("configs/tiny.yaml"), "--steps", "2"};
  const CommandResult ok = RunCommand(args, 120);
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("check passed"), std::string::npos) << ok.output;

  setenv("UP_TEST_PERTURB_DECODER", "1", 1);  // a test hook of decoder_proc
  const CommandResult bad = RunCommand(args, 120);
  unsetenv("UP_TEST_PERTURB_DECODER");
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_NE(bad.output.find("check FAILED"), std::string::npos) << bad.output;
  EXPECT_NE(bad.output.find("first: decoder-weights-s0:"), std::string::npos) << bad.output;
}

// Four stages (two parts of each half; tiny has levels 0-3 and the
// bottleneck): each part replays alone against the recording, bit for bit,
// and `check` compares every part with single-process training.
const std::vector<std::string> kFourStages = {"pipeline.encoder_parts=2",
                                              "pipeline.decoder_parts=2", "train.grad_clip=0.5"};

TEST(Debug, EveryPartReplaysItsRecordingExactly) {
  TempDir dir;
  const std::string rec = Record(dir, kFourStages);
  const YAML::Node index = YAML::LoadFile(rec + "/index.json");
  std::vector<std::string> stages;
  for (const auto& s : index["stages"]) stages.push_back(s.as<std::string>());
  EXPECT_EQ(stages, (std::vector<std::string>{"encoder1", "encoder2", "decoder1", "decoder2"}));
  std::set<int> channels;
  for (const auto& e : index["entries"])
    if (e["kind"].as<std::string>() == "boundary") channels.insert(e["channel"].as<int>());
  EXPECT_GE(channels.size(), 4u);  // encoder1 -> encoder2, -> each decoder part, ...
  for (const char* file : {"fwd-c0-s1-m1.pt", "bwd-c0-s0-m0.pt", "encoder2-weights-s2.pt",
                           "decoder1-s0.stage", "decoder2-step-norms-s1.pt"}) {
    EXPECT_TRUE(fs::exists(fs::path(rec) / file)) << file;
  }
  for (const char* stage : {"encoder_proc", "decoder_proc"}) {
    for (const char* part : {"1", "2"}) {
      const CommandResult r = RunCommand({BinPath(stage), "--replay", rec, "--part", part}, 60);
      EXPECT_EQ(r.exit_code, 0) << stage << " " << part << "\n" << r.output;
      EXPECT_NE(r.output.find("all within atol=0 rtol=0 (largest abs difference 0)"),
                std::string::npos)
          << r.output;
      EXPECT_NE(r.output.find(std::string("part ") + part + " of 2"), std::string::npos)
          << r.output;
    }
  }
  // What a part receives comes from the recording: a changed input shows up in
  // what the part sends and in its weights, never passes silently.
  const std::string file = rec + "/fwd-c0-s0-m0.pt";  // encoder1 -> encoder2
  NamedTensors tensors = LoadTensorFile(file);
  ASSERT_FALSE(tensors.empty());
  tensors[0].second.add_(1e-2);  // all of it: a max-pool passes a single change by
  SaveTensorFile(file, tensors);
  const CommandResult bad =
      RunCommand({BinPath("encoder_proc"), "--replay", rec, "--part", "2"}, 60);
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_NE(bad.output.find("DIFF "), std::string::npos) << bad.output;
  const CommandResult none = RunCommand({BinPath("decoder_proc"), "--replay", rec, "--part", "3"});
  EXPECT_EQ(none.exit_code, 2) << none.output;
  EXPECT_NE(none.output.find("--part"), std::string::npos) << none.output;
}

TEST(Debug, CheckComparesEveryPartAndCatchesAPerturbedDecoderPart) {
  std::vector<std::string> args{BinPath("unet-pipeline"),        "check",   "--config",
                                SourcePath("configs/tiny.yaml"), "--steps", "2"};
  for (const std::string& s : kFourStages) args.insert(args.end(), {"--set", s});
  const CommandResult ok = RunCommand(args, 180);
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("check passed"), std::string::npos) << ok.output;
  EXPECT_NE(ok.output.find("weights, boundary, loss and gradients match"), std::string::npos)
      << ok.output;

  setenv("UP_TEST_PERTURB_DECODER", "1", 1);  // a test hook of decoder_proc (its first part)
  const CommandResult bad = RunCommand(args, 180);
  unsetenv("UP_TEST_PERTURB_DECODER");
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_NE(bad.output.find("check FAILED"), std::string::npos) << bad.output;
  EXPECT_NE(bad.output.find("first: decoder1-weights-s0:"), std::string::npos) << bad.output;
}

TEST(Debug, TraceIsJsonWithEventsFromEveryProcess) {
  TempDir dir;
  std::vector<std::string> args{BinPath("unet-pipeline"), "train"};
  args.insert(args.end(), kTiny2Steps.begin(), kTiny2Steps.end());
  args.insert(args.end(), {"--out", dir / "run", "--trace", dir / "trace.json", "-q"});
  const CommandResult r = RunCommand(args, 120);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const YAML::Node trace = YAML::Load(Slurp(dir / "trace.json"));
  std::set<std::string> processes, names;
  std::set<int64_t> pids;
  for (const auto& e : trace["traceEvents"]) {
    const std::string ph = e["ph"].as<std::string>();
    if (ph == "M" && e["name"].as<std::string>() == "process_name")
      processes.insert(e["args"]["name"].as<std::string>());
    if (ph == "X") {
      names.insert(e["name"].as<std::string>());
      pids.insert(e["pid"].as<int64_t>());
      EXPECT_GE(e["dur"].as<int64_t>(), 0);
      EXPECT_GT(e["ts"].as<int64_t>(), 0);
    }
  }
  EXPECT_EQ(processes.size(), 3u);
  EXPECT_TRUE(processes.count("encoder_proc") && processes.count("decoder_proc"));
  EXPECT_EQ(pids.size(), 3u);
  for (const char* name : {"forward m0", "backward m1", "forward+backward m0", "optimizer step",
                           "send fwd m0", "receive bwd m1", "wait for turn", "load ahead"}) {
    EXPECT_TRUE(names.count(name)) << name;
  }
  EXPECT_FALSE(fs::exists(dir / "trace.json.encoder.part"));
}

TEST(Debug, InspectPrintsACheckpointsTensors) {
  TempDir dir;
  Record(dir);
  const CommandResult r =
      RunCommand({BinPath("unet-pipeline"), "inspect", dir / "run/checkpoints/step-2"}, 60);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("checkpoint of step 2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("stage file (LibTorch archive), step 2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("float32 min"), std::string::npos) << r.output;
  const CommandResult rec = RunCommand({BinPath("unet-pipeline"), "inspect", dir / "rec"}, 60);
  ASSERT_EQ(rec.exit_code, 0) << rec.output;
  EXPECT_NE(rec.output.find("bottleneck [4, 128, 4, 4] float32"), std::string::npos) << rec.output;
  EXPECT_NE(rec.output.find("loss step 1 micro-batch 1"), std::string::npos) << rec.output;
}

TEST(Debug, StandaloneStagesTimeTheirSteps) {
  for (const char* stage : {"encoder_proc", "decoder_proc"}) {
    const CommandResult r = RunCommand({BinPath(stage), "--standalone", "--config",
                                        SourcePath("configs/tiny.yaml"), "--steps", "2"},
                                       60);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("standalone step 2:"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("standalone: peak tensor bytes"), std::string::npos) << r.output;
  }
}

// A stage alone holds what it holds in a run: its neighbours' tensors come in
// the dtype the boundary carries (bf16 here), and a step that needs every
// stage's gradient norms (clipping) takes zeros for the other half's.
TEST(Debug, StandaloneStageHoldsWhatItHoldsInARun) {
  TempDir dir;
  const std::vector<std::string> sets{
      "--set", "train.steps=2", "--set", "train.precision=bf16", "--set", "train.grad_clip=1.0"};
  std::vector<std::string> args{BinPath("unet-pipeline"),        "train", "-q",       "--config",
                                SourcePath("configs/tiny.yaml"), "--out", dir / "run"};
  args.insert(args.end(), sets.begin(), sets.end());
  const CommandResult run = RunCommand(args, 120);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const std::string peaks = JsonField(Slurp(dir / "run/summary.json"), "peak_tensor_bytes");
  for (const char* stage : {"encoder", "decoder"}) {
    std::vector<std::string> alone{
        BinPath(std::string(stage) + "_proc"), "--standalone", "--config",
        SourcePath("configs/tiny.yaml"),       "--steps",      "2"};
    alone.insert(alone.end(), sets.begin(), sets.end());
    const CommandResult r = RunCommand(alone, 60);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    char expect[64];
    std::snprintf(expect, sizeof expect, "peak tensor bytes %.1f MiB",
                  std::stoll(JsonField(peaks, stage)) / 1048576.0);
    EXPECT_NE(r.output.find(expect), std::string::npos) << expect << " in a run; alone:\n"
                                                        << r.output;
  }
}

// A stage alone under train.memory_budget: whether one stage fits a card is
// tried without the other; running out is one line naming it, exit 1.
TEST(Debug, StandaloneStageHonoursTheMemoryBudget) {
  for (const char* stage : {"encoder", "decoder"}) {
    const CommandResult fits = RunCommand(
        {BinPath(std::string(stage) + "_proc"), "--standalone", "--config",
         SourcePath("configs/tiny.yaml"), "--steps", "1", "--set", "train.memory_budget=64MiB"},
        60);
    EXPECT_EQ(fits.exit_code, 0) << fits.output;
    EXPECT_NE(fits.output.find("(budget 64 MiB)"), std::string::npos) << fits.output;
    const CommandResult oom = RunCommand(
        {BinPath(std::string(stage) + "_proc"), "--standalone", "--config",
         SourcePath("configs/tiny.yaml"), "--steps", "1", "--set", "train.memory_budget=2MiB"},
        60);
    EXPECT_EQ(oom.exit_code, 1) << oom.output;
    EXPECT_NE(oom.output.find(std::string("out of memory in the ") + stage + " stage (standalone)"),
              std::string::npos)
        << oom.output;
    EXPECT_NE(oom.output.find("of the device's 2 MiB (train.memory_budget) in use"),
              std::string::npos)
        << oom.output;
  }
}

TEST(Debug, RecordingLoadsInPythonTorch) {
  const std::string python = SourcePath(".venv/bin/python");
  if (access(python.c_str(), X_OK) != 0) GTEST_SKIP() << "no Python at " << python;
  const CommandResult probe = RunCommand({python, "-c", "import torch"}, 60);
  if (probe.exit_code != 0) GTEST_SKIP() << "torch does not import in " << python;
  TempDir dir;
  const std::string rec = Record(dir);
  const std::string script =
      "import json, sys, torch\n"
      "rec = sys.argv[1]\n"
      "index = json.load(open(rec + '/index.json'))\n"
      "n = 0\n"
      "for e in index['entries']:\n"
      "    if e.get('file', '').endswith('.pt'):\n"
      "        d = torch.load(rec + '/' + e['file'], weights_only=True)\n"
      "        assert [t['name'] for t in e['tensors']] == list(d), e\n"
      "        assert all(list(d[t['name']].shape) == t['shape'] for t in e['tensors']), e\n"
      "        n += 1\n"
      "print('loaded', n, 'files')\n";
  const CommandResult r = RunCommand({python, "-W", "ignore", "-c", script, rec}, 60);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("loaded"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace up::test
