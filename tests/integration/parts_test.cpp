// More than two stages (issue 16), as a user runs them: each half cut into
// parts, each part its own encoder_proc or decoder_proc, every skip sent
// straight from the part that makes it to the part that uses it. Whatever
// the cut, the schedule, the micro-batches, clipping or recompute, training
// equals `--single-process` bit for bit (param_digest), resume included, and
// nothing of the run remains afterwards.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/command.h"
#include "tests/support/training_checks.h"

namespace up::test {
namespace {

namespace fs = std::filesystem;

CommandResult Train(std::vector<std::string> args) {
  args.insert(args.begin(), {BinPath("unet-pipeline"), "train"});
  return RunCommand(args);
}

std::vector<std::string> Sets(const std::vector<std::string>& keys) {
  std::vector<std::string> out;
  for (const std::string& k : keys) out.insert(out.end(), {"--set", k});
  return out;
}

struct Cut {
  int encoder_parts;
  int decoder_parts;
};

// The classic 2-D U-Net (4 levels), three steps, clipping on: one reference
// per micro-batch count, then every cut under every schedule.
class PartsEqualSingleProcess : public ::testing::TestWithParam<Cut> {};

TEST_P(PartsEqualSingleProcess, EverySchedule) {
  const Cut cut = GetParam();
  TempDir dir;
  const std::string config = SourcePath("configs/tiny.yaml");
  auto run = [&](const std::string& out, const std::vector<std::string>& keys,
                 std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"--config", config, "--out", dir / out};
    for (const std::string& a : Sets(keys)) args.push_back(a);
    args.insert(args.end(), extra.begin(), extra.end());
    const CommandResult r = Train(args);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return r;
  };
  const std::string parts = "pipeline.encoder_parts=" + std::to_string(cut.encoder_parts);
  const std::string dparts = "pipeline.decoder_parts=" + std::to_string(cut.decoder_parts);
  struct Variant {
    const char* name;
    int micro_batches;
    std::vector<std::string> keys;
  };
  const std::vector<Variant> variants{
      {"sequential", 4, {}},
      {"sequential-recompute", 1, {"pipeline.activations=recompute"}},
      {"gpipe", 4, {"pipeline.schedule=gpipe", "pipeline.lock=off"}},
      {"1f1b-recompute",
       4,
       {"pipeline.schedule=1f1b", "pipeline.lock=off", "pipeline.activations=recompute"}},
      // Each schedule at both micro-batch counts and with both activation
      // policies; recompute by levels and by blocks.
      {"gpipe-recompute-blocks",
       1,
       {"pipeline.schedule=gpipe", "pipeline.lock=off", "pipeline.activations=recompute",
        "pipeline.recompute_unit=block"}},
      {"1f1b", 1, {"pipeline.schedule=1f1b", "pipeline.lock=off"}},
  };
  std::string reference[5];
  for (int mb : {1, 4}) {
    run("single-mb" + std::to_string(mb),
        {"train.steps=3", "train.grad_clip=0.5", "train.micro_batches=" + std::to_string(mb)},
        {"--single-process"});
    reference[mb] = RunDigest(dir / ("single-mb" + std::to_string(mb)));
    ASSERT_EQ(reference[mb].size(), 64u);
  }
  for (const Variant& v : variants) {
    std::vector<std::string> keys{"train.steps=3", "train.grad_clip=0.5",
                                  "train.micro_batches=" + std::to_string(v.micro_batches), parts,
                                  dparts};
    keys.insert(keys.end(), v.keys.begin(), v.keys.end());
    const CommandResult r = run(v.name, keys);
    EXPECT_EQ(RunDigest(dir / v.name), reference[v.micro_batches]) << v.name << "\n" << r.output;
    ExpectNothingLeft(dir / v.name);
  }
  // Each part wrote its own stage file; the summary names every process.
  const int stages = cut.encoder_parts + cut.decoder_parts;
  EXPECT_EQ(JsonField(Slurp(dir / "gpipe/summary.json"), "stages"), std::to_string(stages));
  const std::string step3 = dir / "gpipe/checkpoints/step-3";
  for (int e = 1; e <= cut.encoder_parts; ++e) {
    const std::string file =
        cut.encoder_parts == 1 ? "encoder.pt" : "encoder" + std::to_string(e) + ".pt";
    EXPECT_TRUE(fs::exists(step3 + "/" + file)) << file;
  }
  for (int d = 1; d <= cut.decoder_parts; ++d) {
    const std::string file =
        cut.decoder_parts == 1 ? "decoder.pt" : "decoder" + std::to_string(d) + ".pt";
    EXPECT_TRUE(fs::exists(step3 + "/" + file)) << file;
  }
}

INSTANTIATE_TEST_SUITE_P(Cuts, PartsEqualSingleProcess,
                         ::testing::Values(Cut{1, 2}, Cut{2, 1}, Cut{2, 2}, Cut{3, 3}),
                         [](const auto& info) {
                           return "e" + std::to_string(info.param.encoder_parts) + "d" +
                                  std::to_string(info.param.decoder_parts);
                         });

// Resume across a stop: every part loads its own file and the run ends
// where an uninterrupted one does; predict and export read the part files.
TEST(Parts, ResumeIsExactAndTheModelIsUsable) {
  TempDir dir;
  const std::string config = SourcePath("configs/tiny.yaml");
  const std::vector<std::string> cuts =
      Sets({"pipeline.encoder_parts=3", "pipeline.decoder_parts=3", "train.micro_batches=4"});
  std::vector<std::string> straight{"--single-process", "--config", config, "--out",
                                    dir / "straight"};
  for (const auto& a : Sets({"train.steps=6", "train.micro_batches=4"})) straight.push_back(a);
  ASSERT_EQ(Train(straight).exit_code, 0);
  std::vector<std::string> first{"--config", config, "--out", dir / "parts"};
  first.insert(first.end(), cuts.begin(), cuts.end());
  for (const auto& a : Sets({"train.steps=3"})) first.push_back(a);
  ASSERT_EQ(Train(first).exit_code, 0);
  const CommandResult r = Train({"--resume", dir / "parts", "--set", "train.steps=6"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(RunDigest(dir / "parts"), RunDigest(dir / "straight"));

  // The single-process trainer cannot take the parts' files: one clear line.
  const CommandResult wrong =
      Train({"--resume", dir / "parts", "--single-process", "--set", "train.steps=7"});
  EXPECT_EQ(wrong.exit_code, 2) << wrong.output;
  EXPECT_NE(wrong.output.find("written by a run in other stages"), std::string::npos)
      << wrong.output;

  // export writes the whole model from the part files: the same tensors as
  // the single-process run's.
  const CommandResult a = Up({"export", "--checkpoint", dir / "parts", "--out", dir / "a.pt"});
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const CommandResult b = Up({"export", "--checkpoint", dir / "straight", "--out", dir / "b.pt"});
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_EQ(Slurp(dir / "a.pt"), Slurp(dir / "b.pt"));
}

// nnU-Net's ResidualEncoderUNet in 3-D with deep supervision: a residual
// block uses its input twice (strided conv, pooled skip), and the heads of
// the decoder parts before the last send their logits to the loss. Cut
// anywhere, the same bits.
TEST(Parts, ResidualEncoderWithDeepSupervision) {
  TempDir dir;
  const std::vector<std::string> model =
      Sets({"model.kind=nnunet", "model.plans=" + SourcePath("configs/nnunet/tiny_plans.json"),
            "model.configuration=3d_fullres", "model.in_channels=2", "model.num_classes=3",
            "train.steps=2", "train.grad_clip=1"});
  auto run = [&](const std::string& out, const std::vector<std::string>& keys,
                 std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"--config", SourcePath("tests/data/nnunet/empty.yaml"), "--out",
                                  dir / out};
    args.insert(args.end(), model.begin(), model.end());
    for (const std::string& a : Sets(keys)) args.push_back(a);
    args.insert(args.end(), extra.begin(), extra.end());
    const CommandResult r = Train(args);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return RunDigest(dir / out);
  };
  const std::string reference = run("single", {}, {"--single-process"});
  EXPECT_EQ(run("e2d3", {"pipeline.encoder_parts=2", "pipeline.decoder_parts=3"}), reference);
  EXPECT_EQ(run("e3d2-1f1b",
                {"pipeline.encoder_parts=3", "pipeline.decoder_parts=2", "pipeline.schedule=1f1b",
                 "pipeline.lock=off", "pipeline.activations=recompute"}),
            reference);
}

// The numbers of a JSON array field ("encoder_ms": [1.5, 2]) of `json`.
std::vector<double> Numbers(const std::string& json, const std::string& key) {
  std::string list = JsonField(json, key);
  std::vector<double> out;
  for (char& c : list)
    if (c == '[' || c == ']' || c == ',') c = ' ';
  std::istringstream in(list);
  for (double v; in >> v;) out.push_back(v);
  return out;
}

// The smallest largest part over every way to cut `cost` into `parts` runs
// of adjacent levels, by trying them all; and the largest part of `cuts`.
int64_t BestLargestPart(const std::vector<int64_t>& cost, int parts, size_t from = 0) {
  if (parts == 1) return std::accumulate(cost.begin() + static_cast<long>(from), cost.end(), 0LL);
  int64_t best = std::numeric_limits<int64_t>::max(), head = 0;
  for (size_t end = from + 1; end + static_cast<size_t>(parts - 1) <= cost.size(); ++end) {
    head += cost[end - 1];
    best = std::min(best, std::max(head, BestLargestPart(cost, parts - 1, end)));
  }
  return best;
}
int64_t LargestPart(const std::vector<int64_t>& cost, const std::vector<double>& cuts) {
  int64_t largest = 0, part = 0;
  size_t next = 0;
  for (size_t level = 0; level < cost.size(); ++level) {
    if (next < cuts.size() && static_cast<size_t>(cuts[next]) == level) {
      largest = std::max(largest, part);
      part = 0;
      ++next;
    }
    part += cost[level];
  }
  return std::max(largest, part);
}
// Microseconds, as the cuts weigh them (level_times.h).
std::vector<int64_t> Micros(const std::vector<double>& ms) {
  std::vector<int64_t> out;
  for (double v : ms) out.push_back(std::max<int64_t>(1, std::llround(v * 1e3)));
  return out;
}

// pipeline.balance: time (issue 30): the launcher times every level on the
// stages' device before the run, cuts where the parts' times are as even as
// the levels allow, and writes those cuts into the run's config, so the run
// trains the same bits as one process and a resume keeps its parts without
// timing again. Cuts the config gives stay.
TEST(Parts, BalanceByTimeCutsWhereThePartsTakeEvenTimes) {
  TempDir dir;
  const std::string config = SourcePath("configs/tiny.yaml");
  std::vector<std::string> straight{"--single-process", "--config", config, "--out",
                                    dir / "straight"};
  for (const auto& a : Sets({"train.steps=3", "train.micro_batches=2"})) straight.push_back(a);
  ASSERT_EQ(Train(straight).exit_code, 0);

  // The tiny U-Net, its decoder in two parts cut by time, and `keys`.
  auto timed = [&](const std::string& out, std::vector<std::string> keys) {
    keys.insert(keys.end(),
                {"pipeline.balance=time", "train.micro_batches=2", "pipeline.decoder_parts=2"});
    std::vector<std::string> args{"--config", config, "--out", dir / out};
    for (const std::string& a : Sets(keys)) args.push_back(a);
    return Train(args);
  };
  const CommandResult r = timed("timed", {"train.steps=2", "pipeline.encoder_parts=3"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("pipeline.balance time: encoder levels 0-4 take "), std::string::npos)
      << r.output;

  const std::string times = Slurp(dir / "timed/level_times.json");
  const std::vector<double> enc = Numbers(times, "encoder_ms"), dec = Numbers(times, "decoder_ms");
  ASSERT_EQ(enc.size(), 5u) << times;
  ASSERT_EQ(dec.size(), 4u) << times;
  for (double v : enc) EXPECT_GT(v, 0) << times;
  for (double v : dec) EXPECT_GT(v, 0) << times;
  const std::vector<double> enc_cuts = Numbers(times, "encoder_cuts");
  const std::vector<double> dec_cuts = Numbers(times, "decoder_cuts");
  ASSERT_EQ(enc_cuts.size(), 2u) << times;
  ASSERT_EQ(dec_cuts.size(), 1u) << times;
  // No other cut has a smaller slowest part.
  EXPECT_EQ(LargestPart(Micros(enc), enc_cuts), BestLargestPart(Micros(enc), 3)) << times;
  const std::vector<double> dec_run_order(dec.rbegin(), dec.rend());
  EXPECT_EQ(LargestPart(Micros(dec_run_order), dec_cuts), BestLargestPart(Micros(dec_run_order), 2))
      << times;
  // The run's config holds them: the stages ran them, and a resume will.
  const std::string yaml = Slurp(dir / "timed/config.yaml");
  auto text = [](const std::vector<double>& v) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(int(v[i]));
    return out + "]";
  };
  EXPECT_NE(yaml.find("encoder: " + text(enc_cuts)), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("decoder: " + text(dec_cuts)), std::string::npos) << yaml;
  const int first_part_levels = static_cast<int>(enc_cuts[0]);
  const std::string first_part = first_part_levels == 1
                                     ? "(level 0)"
                                     : "(levels 0-" + std::to_string(first_part_levels - 1) + ")";
  EXPECT_NE(Slurp(dir / "timed/encoder1.log").find(first_part), std::string::npos) << first_part;

  const CommandResult resumed = Train({"--resume", dir / "timed", "--set", "train.steps=3"});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_EQ(resumed.output.find("pipeline.balance time"), std::string::npos) << resumed.output;
  EXPECT_EQ(RunDigest(dir / "timed"), RunDigest(dir / "straight"));
  ExpectNothingLeft(dir / "timed");

  // A half with cuts of its own keeps them; the other is cut by time.
  const CommandResult g = timed("given", {"train.steps=1", "pipeline.cuts.encoder=[1]"});
  ASSERT_EQ(g.exit_code, 0) << g.output;
  const std::string given_yaml = Slurp(dir / "given/config.yaml");
  EXPECT_NE(given_yaml.find("encoder: [1]"), std::string::npos) << given_yaml;
  EXPECT_EQ(Numbers(Slurp(dir / "given/level_times.json"), "encoder_cuts"), std::vector<double>{1});
}

// Cuts the model cannot take are one line naming the key and the valid
// range, before any process starts (nothing is written).
TEST(Parts, BadCutsAreOneLineBeforeAnythingStarts) {
  TempDir dir;
  const std::string config = SourcePath("configs/tiny.yaml");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{"pipeline.encoder_parts=6"},
       "pipeline.encoder_parts = 6: must be in [1, 5], one part per level at most"},
      {{"pipeline.cuts.encoder=[2, 2]"},
       "pipeline.cuts.encoder = [2, 2]: cut 2 would leave a part empty"},
      {{"pipeline.cuts.decoder=[4]"}, "each in [1, 3] (4 levels)"},
      {{"pipeline.encoder_parts=3", "pipeline.cuts.encoder=[2]"},
       "pipeline.cuts.encoder = [2]: makes 2 parts, but pipeline.encoder_parts is 3"},
      {{"pipeline.encoder_parts=2", "pipeline.devices=[cpu, cpu]"},
       "pipeline.devices has 2 entries, expected 3"},
  };
  for (const auto& [keys, says] : cases) {
    std::vector<std::string> args{"--config", config, "--out", dir / "run"};
    for (const std::string& a : Sets(keys)) args.push_back(a);
    const CommandResult r = Train(args);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find(says), std::string::npos) << r.output;
    EXPECT_EQ(ErrorLines(r.output).size(), 1u) << r.output;
    EXPECT_FALSE(fs::exists(dir / "run")) << r.output;
  }
}

}  // namespace
}  // namespace up::test
