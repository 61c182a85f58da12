// nnU-Net's own workflow (data.kind: nnunet) on a dataset nnU-Net itself
// preprocessed (the ctest fixture nnunet_data runs
// tests/support/make_nnunet_preprocessed.sh: nnUNetv2_plan_and_preprocess on
// 6 anisotropic CT-like cases):
//   - with augmentation off, 5 steps of this project's trainer, single-process
//     and pipeline, equal 5 steps of nnUNetTrainer itself (nnunetv2 on the
//     CPU, tests/support/nnunet_trainer_parity.py) from the same weights on
//     the same batches: every loss and every weight, poly LR across epochs;
//   - the cases convert once (a second run converts none, a touched case
//     alone again), nnU-Net's split is written and its fold held out, and the
//     fold is filed where nnUNetv2_predict finds it and segments a case, with
//     nnU-Net's validation folder that nnUNetv2_find_best_configuration reads;
//   - a missing dataset, plans or configuration, or a fold outside 0..4, is
//     one line naming the path and what to run, exit 2.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "tests/support/command.h"

namespace up::test {
namespace {

namespace fs = std::filesystem;

const char* kDataset = "Dataset001_Sample";
const char* kRegionsDataset = "Dataset002_SampleRegions";  // the same cases, labels as regions

// The fixture's data (made here when the test runs outside ctest), copied
// into `dir` so each test converts and writes on its own.
std::string PreprocessedCopy(const TempDir& dir, std::string* why) {
  const std::string python = SourcePath(".venv/bin/python");
  if (access(python.c_str(), X_OK) != 0 ||
      RunCommand({python, "-c", "import nnunetv2"}, 120).exit_code != 0) {
    *why = "nnunetv2 does not import in " + python + " (scripts/install-deps.sh installs it)";
    return "";
  }
  const std::string shared = std::string(UP_BIN_DIR) + "/../test-data/nnunet";
  if (!fs::exists(shared + "/ready")) {
    const CommandResult made =
        RunCommand({SourcePath("tests/support/make_nnunet_preprocessed.sh"), shared}, 600);
    if (made.exit_code != 0) {
      *why = "making the preprocessed dataset failed: " + made.output;
      return "";
    }
  }
  fs::copy(shared + "/preprocessed", dir / "pre", fs::copy_options::recursive);
  fs::copy(shared + "/raw", dir / "raw", fs::copy_options::recursive);
  return dir / "pre";
}

// Each test on its own copy of the preprocessed dataset (skipped, with the
// reason, where nnunetv2 is missing).
class NnunetWorkflow : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    pre = PreprocessedCopy(dir, &why);
    if (pre.empty()) GTEST_SKIP() << why;
  }
  TempDir dir;
  std::string pre;  // dir/pre: nnUNet_preprocessed
};

std::vector<std::string> Set(const TempDir& dir, std::vector<std::string> extra = {}) {
  std::vector<std::string> set{"data.kind=nnunet", "data.dataset=1",
                               "data.preprocessed=" + (dir / "pre"),
                               "data.results=" + (dir / "res"), "train.threads=1"};
  set.insert(set.end(), extra.begin(), extra.end());
  return set;
}

CommandResult UpWith(const std::string& command, std::vector<std::string> args,
                     const std::vector<std::string>& set, double timeout_s = 300) {
  std::vector<std::string> argv{command, "--config", SourcePath("tests/data/nnunet/empty.yaml")};
  argv.insert(argv.end(), args.begin(), args.end());
  for (const std::string& s : set) {
    argv.push_back("--set");
    argv.push_back(s);
  }
  return Up(argv, timeout_s);
}

std::string Losses(const std::string& run) {
  std::ifstream in(run + "/metrics.jsonl");
  std::string line, out;
  while (std::getline(in, line)) out += (out.empty() ? "" : ",") + JsonField(line, "loss");
  return out;
}

// 5 steps (epochs of 2: the poly schedule lowers the rate twice) of the
// configuration with augmentation off: single-process and pipeline train the
// same bits, which equal nnUNetTrainer itself from the same initial weights
// on the same batches (tests/support/nnunet_trainer_parity.py).
// nnU-Net's validation folder (its predictor, a few seconds a case) is
// written after the pipeline's run only when `nnunet_validation`.
void ExpectFiveStepsOfNnunetTrainer(const TempDir& dir, const std::string& pre,
                                    const std::string& configuration,
                                    const std::string& dataset = kDataset,
                                    bool nnunet_validation = false) {
  std::vector<std::string> set = Set(dir, {"train.steps=5", "train.steps_per_epoch=2",
                                           "data.augment=[]", "data.configuration=" + configuration,
                                           "data.dataset=" + dataset, "validate.nnunet=off"});
  const CommandResult single = UpWith("train", {"--single-process", "--out", dir / "single"}, set);
  ASSERT_EQ(single.exit_code, 0) << single.output;
  if (nnunet_validation) set.back() = "validate.nnunet=on";
  const CommandResult pipe = UpWith("train", {"--out", dir / "pipe"}, set);
  ASSERT_EQ(pipe.exit_code, 0) << pipe.output;
  EXPECT_EQ(pipe.output.find("Warning"), std::string::npos) << pipe.output;
  EXPECT_EQ(RunDigest(dir / "single"), RunDigest(dir / "pipe"));
  EXPECT_EQ(Losses(dir / "single"), Losses(dir / "pipe"));
  ASSERT_EQ(UpWith("batches", {"--out", dir / "batches.pt"}, set).exit_code, 0);
  ASSERT_EQ(
      Up({"export", "--checkpoint", dir / "pipe", "--initial", "--out", dir / "init.pt"}).exit_code,
      0);
  ASSERT_EQ(Up({"export", "--checkpoint", dir / "pipe", "--out", dir / "pipe.pt"}).exit_code, 0);
  const CommandResult parity = RunCommand({SourcePath(".venv/bin/python"),
                                           SourcePath("tests/support/nnunet_trainer_parity.py"),
                                           "--preprocessed",
                                           pre,
                                           "--dataset",
                                           dataset,
                                           "--configuration",
                                           configuration,
                                           "--fold",
                                           "0",
                                           "--init",
                                           dir / "init.pt",
                                           "--batches",
                                           dir / "batches.pt",
                                           "--steps",
                                           "5",
                                           "--steps-per-epoch",
                                           "2",
                                           "--ours",
                                           dir / "pipe.pt",
                                           "--our-losses",
                                           Losses(dir / "pipe"),
                                           "--tolerance",
                                           "1e-5"},
                                          600);
  EXPECT_EQ(parity.exit_code, 0) << parity.output;
  EXPECT_NE(parity.output.find("step 5: nnUNetTrainer loss"), std::string::npos) << parity.output;
}

// nnUNetv2_predict segments a raw case with the filed fold.
void ExpectNnunetPredicts(const TempDir& dir, const std::string& pre,
                          const std::string& configuration) {
  fs::create_directories(dir / "in");
  fs::copy_file(dir / "raw/Dataset001_Sample/imagesTr/case_003_0000.nii.gz",
                dir / "in/case_003_0000.nii.gz", fs::copy_options::overwrite_existing);
  const CommandResult predicted = RunCommand({"/usr/bin/env",
                                              "nnUNet_results=" + (dir / "res"),
                                              "nnUNet_preprocessed=" + pre,
                                              "nnUNet_raw=" + (dir / "raw"),
                                              SourcePath(".venv/bin/nnUNetv2_predict"),
                                              "-i",
                                              dir / "in",
                                              "-o",
                                              dir / ("out-" + configuration),
                                              "-d",
                                              "1",
                                              "-c",
                                              configuration,
                                              "-f",
                                              "0",
                                              "-tr",
                                              "nnUNetTrainerUnetPipeline",
                                              "-device",
                                              "cpu",
                                              "--disable_tta",
                                              "--disable_progress_bar"},
                                             600);
  ASSERT_EQ(predicted.exit_code, 0) << predicted.output;
  EXPECT_TRUE(fs::exists(dir / ("out-" + configuration + "/case_003.nii.gz"))) << predicted.output;
}

TEST_F(NnunetWorkflow, FiveStepsEqualNnunetTrainerItselfInBothTrainers) {
  ExpectFiveStepsOfNnunetTrainer(dir, pre, "3d_fullres");
}

// nnU-Net's 2d configuration: a 2-D network trained on slices of the
// volumes, equal to nnUNetTrainer's 2d steps, validated slice by slice, and
// a 2d fold that nnU-Net's own predictor validates. (Augmented 2-D patches
// of volumes: CutPatch.TwoDPatchOfAVolumeIsOneSliceCutAsAnImage and
// SampleData.TwoDNetworkTrainsOnSlicesAndPredictsVolumes.)
TEST_F(NnunetWorkflow, TwoDConfigurationTrainsOnSlicesAsNnunetTrainerDoes) {
  ExpectFiveStepsOfNnunetTrainer(dir, pre, "2d", kDataset, true);
  const std::string metrics = Slurp(dir / "pipe/metrics.jsonl");
  EXPECT_NE(metrics.find("\"val_dice\""), std::string::npos) << metrics;
  const fs::path fold =
      fs::path(dir / "res") / kDataset / "nnUNetTrainerUnetPipeline__nnUNetPlans__2d" / "fold_0";
  EXPECT_TRUE(fs::exists(fold / "checkpoint_final.pth"));
  EXPECT_TRUE(fs::exists(fold / "validation/summary.json"));
}

// A dataset of fewer than 5 cases and no splits_final.json: the project's own
// line (the count, and what to do), before any case is converted or a run
// folder exists; data.fold: all trains on it.
TEST_F(NnunetWorkflow, TooFewCasesForTheFiveFoldSplitIsOneLine) {
  const fs::path data = fs::path(pre) / kDataset / "nnUNetPlans_3d_fullres";
  int removed = 0;
  for (const char* stem : {"case_004", "case_005"}) {
    for (const auto& e : fs::directory_iterator(data)) {
      if (e.path().filename().string().rfind(stem, 0) == 0) {
        fs::remove(e.path());
        ++removed;
      }
    }
  }
  ASSERT_GT(removed, 0) << "no case files named case_004/005 in " << data;
  const CommandResult r =
      UpWith("train", {"--out", dir / "run"}, Set(dir, {"train.steps=1", "validate.nnunet=off"}));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  const std::vector<std::string> errors = ErrorLines(r.output);
  ASSERT_EQ(errors.size(), 1u) << r.output;
  for (const char* part : {"4 case(s)", "splits_final.json", "data.fold: all"})
    EXPECT_NE(errors[0].find(part), std::string::npos) << errors[0];
  EXPECT_EQ(r.output.find("n_splits"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir / "run"));
  EXPECT_FALSE(fs::exists(fs::path(pre) / kDataset / "splits_final.json"));

  const CommandResult all =
      UpWith("train", {"--out", dir / "all"}, Set(dir, {"train.steps=1", "data.fold=all"}));
  EXPECT_EQ(all.exit_code, 0) << all.output;
}

TEST_F(NnunetWorkflow, ConvertsOnceHoldsOutTheFoldAndFilesItForNnunetsPredictor) {
  const std::string splits = pre + "/" + kDataset + "/splits_final.json";
  ASSERT_FALSE(fs::exists(splits));
  // nnU-Net's environment variables find the dataset and the results.
  std::vector<std::string> argv{"/usr/bin/env",
                                "nnUNet_preprocessed=" + pre,
                                "nnUNet_results=" + (dir / "res"),
                                BinPath("unet-pipeline"),
                                "train",
                                "--config",
                                SourcePath("tests/data/nnunet/empty.yaml"),
                                "--out",
                                dir / "run",
                                "--set",
                                "data.kind=nnunet",
                                "--set",
                                "data.dataset=Dataset001_Sample",
                                "--set",
                                "train.epochs=1",
                                "--set",
                                "train.steps_per_epoch=2",
                                "--set",
                                "train.threads=1"};
  const CommandResult first = RunCommand(argv, 600);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  // Every augmentation of nnUNetTrainer's ran, and none of them warned.
  EXPECT_EQ(first.output.find("Warning"), std::string::npos) << first.output;
  EXPECT_NE(first.output.find("converting 6 of 6 cases"), std::string::npos) << first.output;
  ASSERT_TRUE(fs::exists(splits));  // nnU-Net's own 5-fold split
  // Fold 0 of 6 cases holds out 2, which validation scores.
  EXPECT_NE(first.output.find("4 samples for training, 2 for validation"), std::string::npos)
      << first.output;
  const std::string config = Slurp(dir / "run/config.yaml");
  EXPECT_NE(config.find("nesterov: true"), std::string::npos) << config;
  EXPECT_NE(config.find("lr_schedule: \"poly\""), std::string::npos) << config;

  const fs::path fold = fs::path(dir / "res") / kDataset /
                        "nnUNetTrainerUnetPipeline__nnUNetPlans__3d_fullres" / "fold_0";
  for (const char* f : {"checkpoint_final.pth", "checkpoint_best.pth", "unet_pipeline.json",
                        "training_log_unet_pipeline.txt", "../plans.json", "../dataset.json",
                        "../dataset_fingerprint.json"})
    EXPECT_TRUE(fs::exists(fold / f)) << (fold / f);

  // nnU-Net's validation folder, as nnUNetTrainer leaves it: each held-out
  // case (splits_final.json's fold 0 `val`) in its original geometry, and
  // summary.json from nnU-Net's own metrics.
  EXPECT_NE(first.output.find("nnU-Net: validation of 2 cases in "), std::string::npos)
      << first.output;
  const std::string val = JsonField(Slurp(splits), "val");  // fold 0's: the first
  for (size_t at = val.find('"'); at != std::string::npos; at = val.find('"', at + 1)) {
    const size_t end = val.find('"', at + 1);
    const std::string name = val.substr(at + 1, end - at - 1);
    EXPECT_TRUE(fs::exists(fold / "validation" / (name + ".nii.gz"))) << name;
    at = end;
  }
  const std::string summary = Slurp(fold / "validation/summary.json");
  const double dice = std::stod(JsonField(JsonField(summary, "foreground_mean"), "Dice"));
  EXPECT_GE(dice, 0.0) << summary;
  EXPECT_LE(dice, 1.0) << summary;
  EXPECT_FALSE(fs::exists(fold / "validation.staging"));
  // ... which nnUNetv2_find_best_configuration reads for this trainer.
  const CommandResult best = RunCommand(
      {"/usr/bin/env", "nnUNet_results=" + (dir / "res"), "nnUNet_preprocessed=" + pre,
       "nnUNet_raw=" + (dir / "raw"), SourcePath(".venv/bin/nnUNetv2_find_best_configuration"), "1",
       "-c", "3d_fullres", "-tr", "nnUNetTrainerUnetPipeline", "-f", "0", "--disable_ensembling",
       "-np", "1"},
      600);
  ASSERT_EQ(best.exit_code, 0) << best.output;
  EXPECT_NE(best.output.find("*Best*: nnUNetTrainerUnetPipeline__nnUNetPlans__3d_fullres"),
            std::string::npos)
      << best.output;
  EXPECT_TRUE(fs::exists(fs::path(dir / "res") / kDataset / "inference_instructions.txt"));

  // Up to date: a second command converts nothing; a touched case alone again.
  const CommandResult again =
      UpWith("batches", {"--out", dir / "b.pt", "--steps", "1"}, Set(dir, {"train.steps=1"}));
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("6 cases of Dataset001_Sample (nnUNetPlans_3d_fullres) up to date"),
            std::string::npos)
      << again.output;
  const std::string pkl = pre + "/" + kDataset + "/nnUNetPlans_3d_fullres/case_002.pkl";
  fs::last_write_time(pkl, fs::last_write_time(pkl) + std::chrono::seconds(5));
  const CommandResult touched =
      UpWith("batches", {"--out", dir / "b.pt", "--steps", "1"}, Set(dir, {"train.steps=1"}));
  ASSERT_EQ(touched.exit_code, 0) << touched.output;
  EXPECT_NE(touched.output.find("converting 1 of 6 cases"), std::string::npos) << touched.output;

  // nnU-Net's predictor loads the fold as filed and segments a raw case.
  ExpectNnunetPredicts(dir, pre, "3d_fullres");
}

// Region-based labels (dataset.json's "organ": [1, 2], "lesion": 2, as
// nnU-Net's BraTS datasets): one sigmoid output per region, nnUNetTrainer's
// DC_and_BCE_loss on region targets, bit for bit its steps; validated per
// region, with nnU-Net's own validation folder.
TEST_F(NnunetWorkflow, RegionBasedLabelsTrainAsNnunetTrainerDoes) {
  ExpectFiveStepsOfNnunetTrainer(dir, pre, "3d_fullres", kRegionsDataset, true);
  const std::string config = Slurp(dir / "pipe/config.yaml");
  EXPECT_NE(config.find("num_classes: 2"), std::string::npos) << config;
  EXPECT_NE(config.find("regions: [[1, 2], [2]]"), std::string::npos) << config;
  EXPECT_NE(config.find("regions_class_order: [1, 2]"), std::string::npos) << config;
  const std::string metrics = Slurp(dir / "pipe/metrics.jsonl");
  EXPECT_NE(metrics.find("\"val_dice_r1\""), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("\"val_dice_r2\""), std::string::npos) << metrics;
  // nnU-Net's predictor and metrics on the fold, by region.
  const fs::path fold = fs::path(dir / "res") / kRegionsDataset /
                        "nnUNetTrainerUnetPipeline__nnUNetPlans__3d_fullres" / "fold_0";
  const std::string summary = Slurp(fold / "validation/summary.json");
  EXPECT_NE(summary.find("\"(1, 2)\""), std::string::npos) << summary;  // nnU-Net's region keys
}

// Folds started at once (as five nnUNetv2_train jobs often are) share the
// cache: one converts while the other waits for it, then finds it done.
TEST_F(NnunetWorkflow, RunsStartedAtOnceConvertOnce) {
  std::vector<std::unique_ptr<BackgroundCommand>> runs;
  for (const char* fold : {"0", "1"}) {
    std::vector<std::string> argv{BinPath("unet-pipeline"),
                                  "batches",
                                  "--config",
                                  SourcePath("tests/data/nnunet/empty.yaml"),
                                  "--out",
                                  dir / (std::string("b") + fold + ".pt"),
                                  "--steps",
                                  "1"};
    for (const std::string& s : Set(dir, {"train.steps=1", std::string("data.fold=") + fold}))
      argv.insert(argv.end(), {"--set", s});
    runs.push_back(std::make_unique<BackgroundCommand>(argv));
  }
  int converted = 0, found_done = 0;
  for (auto& run : runs) {
    const CommandResult r = run->Wait(300);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    converted += r.output.find("converting 6 of 6 cases") != std::string::npos;
    found_done += r.output.find(
                      "6 cases of Dataset001_Sample (nnUNetPlans_3d_fullres) up to "
                      "date") != std::string::npos;
  }
  EXPECT_EQ(converted, 1);
  EXPECT_EQ(found_done, 1);
}

TEST_F(NnunetWorkflow, PlanMeasuresTheDatasetsOwnNetwork) {
  // The probes train the plans' network on synthetic data of its patch: one
  // process and the pipeline (--way; every way is PlanMeasured's).
  const CommandResult r = UpWith("plan",
                                 {"--gpu-mem", "16GiB", "--probe-voxels", "4000", "--way",
                                  "single-process", "--way", "pipeline offload"},
                                 Set(dir), 600);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(": 3-D, "), std::string::npos) << r.output;  // the plans' network
  EXPECT_NE(r.output.find("recommended: "), std::string::npos) << r.output;
}

TEST_F(NnunetWorkflow, MissingDatasetPlansConfigurationOrFoldIsOneLine) {
  const struct {
    std::vector<std::string> set;
    std::string says;
  } cases[] = {
      {{"data.dataset=7"}, "nnUNetv2_plan_and_preprocess -d 7"},
      {{"data.plans=nnUNetResEncUNetLPlans"}, "nnUNetResEncUNetLPlans.json"},
      {{"data.configuration=3d_lowres"}, "3d_lowres: not in"},
      {{"data.fold=7"}, "data.fold = 7: expected a fold 0..4"},
      {{"data.path=/tmp"}, "drop data.path"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> set = Set(dir);
    set.insert(set.end(), c.set.begin(), c.set.end());
    const CommandResult r = UpWith("train", {"--out", dir / "run"}, set);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    const std::vector<std::string> errors = ErrorLines(r.output);
    ASSERT_EQ(errors.size(), 1u) << r.output;
    EXPECT_NE(errors[0].find(c.says), std::string::npos) << errors[0];
    EXPECT_FALSE(fs::exists(dir / "run")) << "a refused config left a run folder";
  }
  // A cascade stage (nnU-Net's 3d_cascade_fullres, planned beside
  // 3d_lowres for large datasets) is refused by name.
  const std::string plans = pre + "/" + kDataset + "/nnUNetPlans.json";
  ASSERT_EQ(RunCommand({SourcePath(".venv/bin/python"), "-c",
                        "import json,sys; p=sys.argv[1]; j=json.load(open(p)); "
                        "j['configurations']['3d_cascade_fullres']={'inherits_from':'3d_fullres',"
                        "'previous_stage':'3d_lowres'}; json.dump(j,open(p,'w'))",
                        plans})
                .exit_code,
            0);
  // An ignore label in dataset.json is refused by name, too.
  const std::string dataset_json = pre + "/" + kRegionsDataset + "/dataset.json";
  ASSERT_EQ(RunCommand({SourcePath(".venv/bin/python"), "-c",
                        "import json,sys; p=sys.argv[1]; j=json.load(open(p)); "
                        "j['labels']['ignore']=3; json.dump(j,open(p,'w'))",
                        dataset_json})
                .exit_code,
            0);
  const CommandResult ignore =
      UpWith("train", {"--out", dir / "run"}, Set(dir, {"data.dataset=2"}));
  EXPECT_EQ(ignore.exit_code, 2) << ignore.output;
  EXPECT_NE(ignore.output.find("has an ignore label, which is not built yet"), std::string::npos)
      << ignore.output;
  std::vector<std::string> cascade = Set(dir, {"data.configuration=3d_cascade_fullres"});
  const CommandResult refused = UpWith("train", {"--out", dir / "run"}, cascade);
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  ASSERT_EQ(ErrorLines(refused.output).size(), 1u) << refused.output;
  EXPECT_NE(refused.output.find("3d_cascade_fullres: a cascade stage (it takes 3d_lowres's "
                                "predictions as an input), which is not built; train 3d_lowres"),
            std::string::npos)
      << refused.output;
  EXPECT_FALSE(fs::exists(dir / "run"));

  // A stage alone on the dataset before any train or batches converted it:
  // the line says what converts it (not the cache's own advice).
  std::vector<std::string> alone{BinPath("encoder_proc"),
                                 "--standalone",
                                 "--config",
                                 SourcePath("tests/data/nnunet/empty.yaml"),
                                 "--steps",
                                 "1"};
  for (const std::string& s : Set(dir)) alone.insert(alone.end(), {"--set", s});
  const CommandResult unconverted = RunCommand(alone, 300);
  EXPECT_EQ(unconverted.exit_code, 2) << unconverted.output;
  EXPECT_NE(unconverted.output.find("its preprocessed cases are not converted yet"),
            std::string::npos)
      << unconverted.output;
  EXPECT_NE(unconverted.output.find("`unet-pipeline train` or `unet-pipeline batches`"),
            std::string::npos)
      << unconverted.output;

  // The configuration planned but never preprocessed: its folder is missing.
  fs::remove_all(pre + "/" + kDataset + "/nnUNetPlans_3d_fullres");
  const CommandResult r = UpWith("train", {"--out", dir / "run"}, Set(dir));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  ASSERT_EQ(ErrorLines(r.output).size(), 1u) << r.output;
  EXPECT_NE(r.output.find("nnUNetv2_plan_and_preprocess -d 1 -c 3d_fullres"), std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace up::test
