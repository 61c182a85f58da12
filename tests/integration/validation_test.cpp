// Validation during training, with the real binaries: the held-out cases are
// predicted whole (sliding windows) through the two stages, scored per class
// and BraTS region, recorded in metrics.jsonl, summary.json, the progress
// line and curves.svg; the pipeline's scores equal the single-process
// trainer's bit for bit; validating leaves the training untouched (the same
// param_digest however often it runs); checkpoints/best follows the best
// val_dice. Bad data.validation settings fail with exit 2 and one line.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <sstream>

#include "tests/support/command.h"

namespace up::test {
namespace {

namespace fs = std::filesystem;

class Validation : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    const CommandResult make = RunCommand(
        {"/usr/bin/env", "UP_BUILD_DIR=" + BinPath(".."), SourcePath("scripts/make-sample-data.sh"),
         *dir_ / "data", "--images", "1", "--cases", "3"},
        120);
    ASSERT_EQ(make.exit_code, 0) << make.output;
  }
  static void TearDownTestSuite() { delete dir_; }

  // tiny3d on the three sample BraTS cases, case01 held out; 40^3 cases
  // under 32^3 windows: 8 windows a case, one a network call.
  static CommandResult Train(const std::string& out, std::vector<std::string> extra) {
    std::vector<std::string> args{"train",
                                  "--config",
                                  SourcePath("configs/tiny3d.yaml"),
                                  "--out",
                                  out,
                                  "--set",
                                  "data.kind=nifti",
                                  "--set",
                                  "data.path=" + *dir_ / "data/brats",
                                  "--set",
                                  "model.num_classes=4",
                                  "--set",
                                  "model.features=[4,8]",
                                  "--set",
                                  "train.batch_size=2",
                                  "--set",
                                  "train.micro_batches=2",
                                  "--set",
                                  "train.steps=4",
                                  "--set",
                                  "data.validation=[case01]"};
    for (std::string& e : extra) args.push_back(std::move(e));
    return Up(args, 600);
  }

  static TempDir* dir_;
};
TempDir* Validation::dir_ = nullptr;

// step -> the metrics line of that step, for the lines that carry val_dice.
std::map<int, std::string> ValidationLines(const std::string& run) {
  std::map<int, std::string> out;
  std::istringstream lines(Slurp(run + "/metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    if (line.find("\"val_dice\"") == std::string::npos) continue;
    out[std::stoi(JsonField(line, "step"))] = line;
  }
  return out;
}

// The validation fields of a metrics line (val_s, the time, left out).
std::string Scores(const std::string& line) {
  std::string out;
  for (const char* key : {"val_dice", "val_dice_1", "val_dice_2", "val_dice_3", "val_dice_wt",
                          "val_dice_tc", "val_dice_et", "val_cases"})
    out += std::string(key) + "=" + JsonField(line, key) + " ";
  return out;
}

TEST_F(Validation, ThroughTheStagesEqualsSingleProcessAndLeavesTrainingAlone) {
  TempDir out;
  const CommandResult pipe = Train(out / "pipe", {"--set", "validate.every=2"});
  ASSERT_EQ(pipe.exit_code, 0) << pipe.output;
  const CommandResult single =
      Train(out / "single", {"--single-process", "--set", "validate.every=2"});
  ASSERT_EQ(single.exit_code, 0) << single.output;
  // Overlapped stages validate in one phase instead of taking turns.
  const CommandResult gpipe =
      Train(out / "gpipe", {"--set", "validate.every=2", "--set", "pipeline.schedule=gpipe",
                            "--set", "pipeline.lock=off"});
  ASSERT_EQ(gpipe.exit_code, 0) << gpipe.output;
  // Only after the last step.
  const CommandResult once = Train(out / "once", {});
  ASSERT_EQ(once.exit_code, 0) << once.output;
  // Five stages: the first part cuts the windows, the middle ones pass them
  // on, the last blends and scores; in turns and all at once.
  const std::vector<std::string> parts{"--set", "validate.every=2",
                                       "--set", "pipeline.encoder_parts=3",
                                       "--set", "pipeline.decoder_parts=2"};
  const CommandResult five = Train(out / "five", parts);
  ASSERT_EQ(five.exit_code, 0) << five.output;
  std::vector<std::string> overlapped = parts;
  // ... this one recomputing by blocks with what it keeps parked in host
  // memory (pipeline.offload): validation passes through the same way.
  overlapped.insert(overlapped.end(),
                    {"--set", "pipeline.schedule=1f1b", "--set", "pipeline.lock=off", "--set",
                     "pipeline.activations=recompute", "--set", "pipeline.recompute_unit=block",
                     "--set", "pipeline.offload=on"});
  const CommandResult five_1f1b = Train(out / "five-1f1b", overlapped);
  ASSERT_EQ(five_1f1b.exit_code, 0) << five_1f1b.output;

  const std::map<int, std::string> lines = ValidationLines(out / "pipe");
  ASSERT_EQ(lines.size(), 2u) << Slurp(out / "pipe/metrics.jsonl");
  ASSERT_TRUE(lines.count(2) && lines.count(4));
  EXPECT_EQ(JsonField(lines.at(4), "val_cases"), "1");
  for (const char* key : {"val_dice_1", "val_dice_2", "val_dice_3", "val_dice_wt", "val_dice_tc",
                          "val_dice_et", "val_s"})
    EXPECT_FALSE(JsonField(lines.at(4), key).empty()) << key << " in " << lines.at(4);
  const double dice = std::stod(JsonField(lines.at(4), "val_dice"));
  EXPECT_GE(dice, 0.0);
  EXPECT_LE(dice, 1.0);

  const std::map<int, std::string> single_lines = ValidationLines(out / "single");
  const std::map<int, std::string> gpipe_lines = ValidationLines(out / "gpipe");
  ASSERT_EQ(single_lines.size(), 2u);
  ASSERT_EQ(gpipe_lines.size(), 2u);
  for (int step : {2, 4}) {
    EXPECT_EQ(Scores(lines.at(step)), Scores(single_lines.at(step))) << "step " << step;
    EXPECT_EQ(Scores(lines.at(step)), Scores(gpipe_lines.at(step))) << "step " << step;
    for (const char* run : {"five", "five-1f1b"}) {
      const std::map<int, std::string> part_lines = ValidationLines(out / run);
      ASSERT_EQ(part_lines.size(), 2u) << run;
      EXPECT_EQ(Scores(lines.at(step)), Scores(part_lines.at(step))) << run << " step " << step;
    }
  }
  EXPECT_EQ(RunDigest(out / "five"), RunDigest(out / "single"));
  EXPECT_EQ(RunDigest(out / "five-1f1b"), RunDigest(out / "single"));
  const std::map<int, std::string> once_lines = ValidationLines(out / "once");
  ASSERT_EQ(once_lines.size(), 1u);
  EXPECT_EQ(Scores(once_lines.at(4)), Scores(lines.at(4)));

  // Validating twice, once or through another schedule trains the same weights.
  EXPECT_FALSE(RunDigest(out / "pipe").empty());
  EXPECT_EQ(RunDigest(out / "pipe"), RunDigest(out / "single"));
  EXPECT_EQ(RunDigest(out / "pipe"), RunDigest(out / "gpipe"));
  EXPECT_EQ(RunDigest(out / "pipe"), RunDigest(out / "once"));

  // The progress line and the summary carry it; the curves draw it.
  EXPECT_NE(pipe.output.find("validation after step 4: val_dice "), std::string::npos)
      << pipe.output;
  const std::string summary = Slurp(out / "pipe/summary.json");
  EXPECT_FALSE(JsonField(summary, "best_val_dice").empty()) << summary;
  const std::string best_step = JsonField(summary, "best_val_step");
  EXPECT_TRUE(best_step == "2" || best_step == "4") << summary;
  EXPECT_NE(Slurp(out / "pipe/curves.svg").find("class=\"val_dice\""), std::string::npos);

  // checkpoints/best: a link to a whole checkpoint of the best step, which
  // predict takes.
  const fs::path best = fs::path(out / "pipe") / "checkpoints" / "best";
  ASSERT_TRUE(fs::is_symlink(best));
  EXPECT_EQ(fs::read_symlink(best).string(), "best-" + best_step);
  EXPECT_NE(Slurp((best / "manifest.json").string()).find("\"step\":" + best_step),
            std::string::npos);
  const CommandResult predict = Up({"predict", "--checkpoint", best.string(), "--input",
                                    *dir_ / "data/brats/case01", "--out", out / "pred"});
  ASSERT_EQ(predict.exit_code, 0) << predict.output;
  EXPECT_TRUE(fs::exists(out / "pred/case01_seg.nii.gz"));
}

TEST_F(Validation, BadSettingsAreOneLine) {
  TempDir out;
  const CommandResult unknown = Train(out / "a", {"--set", "data.validation=[case07]"});
  EXPECT_EQ(unknown.exit_code, 2) << unknown.output;
  EXPECT_NE(unknown.output.find("data.validation names case 'case07', which data.path"),
            std::string::npos)
      << unknown.output;
  const CommandResult all = Train(out / "b", {"--set", "data.validation=0.9"});
  EXPECT_EQ(all.exit_code, 2) << all.output;
  EXPECT_NE(all.output.find("holds out 3 of the dataset's 3 cases, leaving none to train on"),
            std::string::npos)
      << all.output;
  const CommandResult share = Train(out / "c", {"--set", "data.validation=1.5"});
  EXPECT_EQ(share.exit_code, 2) << share.output;
  EXPECT_NE(share.output.find("data.validation = 1.5: must be in [0, 1)"), std::string::npos)
      << share.output;
  const CommandResult alone = Up({"train", "--config", SourcePath("configs/tiny.yaml"), "--set",
                                  "validate.every=5", "--out", out / "d"});
  EXPECT_EQ(alone.exit_code, 2) << alone.output;
  EXPECT_NE(alone.output.find("validate.every = 5: there is no validation without data.validation"),
            std::string::npos)
      << alone.output;
  for (const char* run : {"a", "b", "c", "d"})
    EXPECT_FALSE(fs::exists(out / (std::string(run) + "/checkpoints"))) << run;
}

}  // namespace
}  // namespace up::test
