// nnU-Net's folders (common/nnunet/nnunet_layout.h): a preprocessed dataset
// found by name, number or path with its channels, labels or regions, plans
// and data folder; the cases of the data folder; the folds of
// splits_final.json; the trained-model folder name. Each missing or wrong
// piece is one UsageError naming the path and what to run. The folders are
// built here in a temporary nnUNet_preprocessed.
#include "common/nnunet/nnunet_layout.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "common/base/errors.h"
#include "tests/common/nnunet/nnunet_test_support.h"
#include "tests/support/command.h"

namespace up {
namespace nnunet_layout_test {  // a unity batch shares one file scope
namespace {

namespace fs = std::filesystem;
using test::SourcePath;
using test::TempDir;
using Strings = std::vector<std::string>;

using nnunet_test::UsageErrorOf;
using nnunet_test::WriteText;

// Channels and labels listed out of their numbers' order.
const char* kDatasetJson = R"({"channel_names": {"1": "T2", "0": "T1"},
  "labels": {"background": 0, "edema": 2, "tumor": 1},
  "numTraining": 2, "file_ending": ".nii.gz"})";

// root/Dataset001_Sample with dataset.json, the ResEnc-L plans (whose
// 3d_fullres data_identifier, nnUNetPlans_3d_fullres, is not the plans'
// name + configuration) and that data folder.
std::string MakeDataset(const TempDir& root, const std::string& dataset_json = kDatasetJson,
                        const std::string& name = "Dataset001_Sample") {
  const std::string dir = root / name;
  WriteText(dir + "/dataset.json", dataset_json);
  fs::create_directories(dir);
  fs::copy_file(SourcePath("configs/nnunet/nnUNetResEncUNetLPlans.json"),
                dir + "/nnUNetResEncUNetLPlans.json");
  fs::create_directories(dir + "/nnUNetPlans_3d_fullres");
  return dir;
}

NnunetDataset Find(const std::string& dataset, const std::string& preprocessed) {
  return FindNnunetDataset(dataset, preprocessed, "nnUNetResEncUNetLPlans", "3d_fullres");
}

TEST(NnunetLayout, FindsADatasetByNameWithItsChannelsLabelsAndDataFolder) {
  TempDir root;
  const std::string dir = MakeDataset(root);
  const NnunetDataset d = Find("Dataset001_Sample", root.path());
  EXPECT_EQ(d.preprocessed, root.path());
  EXPECT_EQ(d.name, "Dataset001_Sample");
  EXPECT_EQ(d.id, 1);
  EXPECT_EQ(d.dir, dir);
  EXPECT_EQ(d.plans, "nnUNetResEncUNetLPlans");
  EXPECT_EQ(d.plans_file, dir + "/nnUNetResEncUNetLPlans.json");
  EXPECT_EQ(d.configuration, "3d_fullres");
  EXPECT_EQ(d.data_identifier, "nnUNetPlans_3d_fullres");
  EXPECT_EQ(d.data_dir, dir + "/nnUNetPlans_3d_fullres");
  EXPECT_EQ(d.channel_names, (Strings{"T1", "T2"}));
  EXPECT_EQ(d.label_names, (Strings{"background", "tumor", "edema"}));
  EXPECT_TRUE(d.regions.empty());
  EXPECT_EQ(d.outputs(), 3);
  EXPECT_EQ(d.splits_file(), dir + "/splits_final.json");
}

TEST(NnunetLayout, FindsADatasetByItsNumberOrItsPath) {
  TempDir root;
  const std::string dir = MakeDataset(root);
  MakeDataset(root, kDatasetJson, "Dataset010_Other");
  for (const char* number : {"1", "001"}) {
    const NnunetDataset d = Find(number, root.path());
    EXPECT_EQ(d.name, "Dataset001_Sample") << number;
    EXPECT_EQ(d.id, 1);
    EXPECT_EQ(d.dir, dir);
  }
  EXPECT_EQ(Find("10", root.path()).name, "Dataset010_Other");
  for (const std::string& path : {dir, dir + "/", root / "./Dataset001_Sample"}) {
    const NnunetDataset d = Find(path, "");  // no nnUNet_preprocessed needed
    EXPECT_EQ(d.dir, dir) << path;
    EXPECT_EQ(d.name, "Dataset001_Sample");
    EXPECT_EQ(d.preprocessed, root.path());
    EXPECT_EQ(d.id, 1);
    EXPECT_EQ(d.data_dir, dir + "/nnUNetPlans_3d_fullres");
  }
}

TEST(NnunetLayout, MissingDatasetNamesWhereItLookedAndWhatToRun) {
  TempDir root;
  MakeDataset(root);
  const std::string by_name = UsageErrorOf([&] { Find("Dataset002_Liver", root.path()); });
  EXPECT_HAS(by_name,
             "data.dataset = 'Dataset002_Liver': no folder '" + (root / "Dataset002_Liver") + "'");
  EXPECT_HAS(by_name, "run `nnUNetv2_plan_and_preprocess -d 2 -c 3d_fullres` first");
  EXPECT_HAS(UsageErrorOf([&] { Find("2", root.path()); }),
             "data.dataset = 2: no Dataset002_* folder in '" + root.path() + "'");
  EXPECT_HAS(UsageErrorOf([&] { Find(root / "Dataset003_X", ""); }),
             "data.dataset = '" + (root / "Dataset003_X") + "': no such folder");
  EXPECT_HAS(UsageErrorOf([] { Find("Dataset001_Sample", ""); }), "nnUNet_preprocessed is not set");
  EXPECT_HAS(UsageErrorOf([&] { Find("1", root / "nowhere"); }),
             "nnUNet_preprocessed = '" + (root / "nowhere") + "': no such folder");
  EXPECT_HAS(UsageErrorOf([] { Find("", "/tmp"); }), "data.dataset is empty");
  MakeDataset(root, kDatasetJson, "Dataset001_Again");
  EXPECT_HAS(UsageErrorOf([&] { Find("1", root.path()); }),
             "has Dataset001_Again and Dataset001_Sample; name the one to train on");
}

TEST(NnunetLayout, MissingDataFolderSaysItWasPlannedNotPreprocessed) {
  TempDir root;
  const std::string dir = MakeDataset(root);
  fs::remove(dir + "/nnUNetPlans_3d_fullres");
  const std::string m = UsageErrorOf([&] { Find("Dataset001_Sample", root.path()); });
  EXPECT_HAS(m, "data.configuration = 3d_fullres: '" + dir +
                    "/nnUNetPlans_3d_fullres' is missing (planned, not preprocessed)");
  EXPECT_HAS(m, "nnUNetv2_plan_and_preprocess -d 1 -c 3d_fullres");
}

TEST(NnunetLayout, MissingPlansOrConfigurationIsNamed) {
  TempDir root;
  const std::string dir = MakeDataset(root);
  const std::string planner = UsageErrorOf([&] {
    FindNnunetDataset("Dataset001_Sample", root.path(), "nnUNetResEncUNetXLPlans", "2d");
  });
  EXPECT_HAS(planner, "data.plans = nnUNetResEncUNetXLPlans: no plans file '" + dir +
                          "/nnUNetResEncUNetXLPlans.json'");
  EXPECT_HAS(planner, "run `nnUNetv2_plan_and_preprocess -d 1 -pl <planner>` first");
  const std::string plain = UsageErrorOf(
      [&] { FindNnunetDataset("Dataset001_Sample", root.path(), "nnUNetPlans", "3d_fullres"); });
  EXPECT_HAS(plain, "no plans file '" + dir + "/nnUNetPlans.json'");
  EXPECT_HAS(plain, "run `nnUNetv2_plan_and_preprocess -d 1 -c 3d_fullres` first");
  const std::string lowres = UsageErrorOf([&] {
    FindNnunetDataset("Dataset001_Sample", root.path(), "nnUNetResEncUNetLPlans", "3d_lowres");
  });
  EXPECT_HAS(lowres, "data.configuration = 3d_lowres: not in '" + dir +
                         "/nnUNetResEncUNetLPlans.json' (it has 2d, 3d_fullres)");
}

TEST(NnunetLayout, DataIdentifierComesFromThePlansItsParentOrTheirNames) {
  TempDir root;
  const std::string dir = MakeDataset(root);
  WriteText(dir + "/myPlans.json", R"({"configurations": {
    "3d_fullres": {"data_identifier": "shared_3d"},
    "3d_bs8": {"inherits_from": "3d_fullres", "batch_size": 8},
    "3d_bs6": {"inherits_from": "3d_bs8", "batch_size": 6},
    "3d_mine": {"inherits_from": "3d_fullres", "data_identifier": "mine_3d"},
    "3d_mine_bs6": {"inherits_from": "3d_mine", "batch_size": 6},
    "2d": {"batch_size": 12},
    "3d_cascade_fullres": {"inherits_from": "3d_fullres", "previous_stage": "3d_lowres"}}})");
  for (const char* folder : {"shared_3d", "mine_3d", "myPlans_2d"})
    fs::create_directories(dir + "/" + folder);
  auto find = [&](const std::string& configuration) {
    return FindNnunetDataset("Dataset001_Sample", root.path(), "myPlans", configuration);
  };
  EXPECT_EQ(find("3d_bs8").data_identifier, "shared_3d");
  EXPECT_EQ(find("3d_bs8").data_dir, dir + "/shared_3d");
  EXPECT_EQ(find("3d_bs6").data_identifier, "shared_3d");  // a grandchild
  EXPECT_EQ(find("3d_mine_bs6").data_dir, dir + "/mine_3d");
  EXPECT_EQ(find("3d_fullres").data_dir, dir + "/shared_3d");
  EXPECT_EQ(find("2d").data_identifier, "myPlans_2d");
  EXPECT_HAS(UsageErrorOf([&] { find("3d_cascade_fullres"); }),
             "data.configuration = 3d_cascade_fullres: a cascade stage");
}

TEST(NnunetLayout, RegionLabelsBecomeRegionsInDatasetJsonOrder) {
  TempDir root;
  MakeDataset(root, R"({"channel_names": {"0": "T1", "1": "T1ce", "2": "T2", "3": "FLAIR"},
    "labels": {"background": 0, "whole tumor": [1, 2, 3], "tumor core": [3, 2],
               "enhancing tumor": 3},
    "regions_class_order": [1, 2, 3]})");
  const NnunetDataset d = Find("Dataset001_Sample", root.path());
  EXPECT_EQ(d.channel_names, (Strings{"T1", "T1ce", "T2", "FLAIR"}));
  EXPECT_EQ(d.regions, (std::vector<std::vector<int>>{{1, 2, 3}, {2, 3}, {3}}));
  EXPECT_EQ(d.regions_class_order, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(d.label_names, (Strings{"label 0", "label 1", "label 2", "label 3"}));
  EXPECT_EQ(d.outputs(), 3);
}

TEST(NnunetLayout, LabelsItCannotTrainOnAreRefused) {
  auto error = [](const std::string& dataset_json) {
    TempDir root;
    MakeDataset(root, dataset_json);
    return UsageErrorOf([&] { Find("Dataset001_Sample", root.path()); });
  };
  const std::string ignore = error(
      R"({"channel_names": {"0": "CT"}, "labels": {"background": 0, "liver": 1, "ignore": 2}})");
  EXPECT_HAS(ignore, "Dataset001_Sample/dataset.json': has an ignore label, which is not built");
  EXPECT_HAS(error(R"({"channel_names": {"0": "CT"}, "regions_class_order": [1],
                     "labels": {"background": 0, "a": [1, 2], "b": 2}})"),
             "region-based labels need regions_class_order with one label per region (2)");
  EXPECT_HAS(error(R"({"channel_names": {"0": "CT"}, "labels": {"background": 0, "liver": 2}})"),
             "label 'liver' = 2; labels must be 0..1, each once");
  EXPECT_HAS(error(R"({"channel_names": {}, "labels": {"background": 0, "liver": 1}})"),
             "has no channel_names");
  EXPECT_HAS(error(R"({"channel_names": {"0": "CT"}, "labels": {"background": 0}})"),
             "needs labels with background and at least one class");
  EXPECT_HAS(error(R"({"channel_names": {"0": "CT", "labels": )"), "is not valid JSON");
}

TEST(NnunetLayout, DatasetJsonWithoutChannelsLabelsOrRegionOrderIsAUsageError) {
  auto error = [](const std::string& dataset_json) {
    TempDir root;
    MakeDataset(root, dataset_json);
    return UsageErrorOf([&] { Find("Dataset001_Sample", root.path()); });
  };
  const std::string channels = error(R"({"labels": {"background": 0, "liver": 1}})");
  EXPECT_HAS(channels, "Dataset001_Sample/dataset.json' has no channel_names");
  EXPECT_HAS(channels, "nnUNetv2_plan_and_preprocess -d 1 -c 3d_fullres");
  EXPECT_HAS(error(R"({"channel_names": {"0": "CT"}, "numTraining": 2})"),
             "Dataset001_Sample/dataset.json' needs labels with background and at least one "
             "class");
  EXPECT_HAS(error(R"({"channel_names": {"0": "CT"},
                     "labels": {"background": 0, "a": [1, 2], "b": 2}})"),
             "region-based labels need regions_class_order with one label per region (2)");
  // nnU-Net v1's "modality" still names the channels.
  TempDir root;
  MakeDataset(root, R"({"modality": {"0": "CT"}, "labels": {"background": 0, "liver": 1}})");
  EXPECT_EQ(Find("Dataset001_Sample", root.path()).channel_names, (Strings{"CT"}));
}

TEST(NnunetLayout, PlansWithoutConfigurationsIsAUsageError) {
  TempDir root;
  const std::string dir = MakeDataset(root);
  WriteText(dir + "/myPlans.json",
            R"({"plans_name": "myPlans", "dataset_name": "Dataset001_Sample"})");
  EXPECT_HAS(UsageErrorOf([&] {
               FindNnunetDataset("Dataset001_Sample", root.path(), "myPlans", "3d_fullres");
             }),
             "data.configuration = 3d_fullres: not in '" + dir + "/myPlans.json' (it has none)");
}

TEST(NnunetLayout, FoldWithoutTrainOrValOrNotAMappingIsAUsageError) {
  TempDir dir;
  const std::string f = dir / "splits_final.json";
  auto error = [&](const std::string& splits, const std::string& fold) {
    WriteText(f, splits);
    return UsageErrorOf([&] { ReadNnunetFold(f, fold); });
  };
  EXPECT_HAS(error(R"([{"train": ["a"]}])", "0"), "nnU-Net: '" + f + "': fold 0 has no 'val' list");
  EXPECT_HAS(error(R"([{"train": ["a"], "val": ["b"]}, {"val": ["a"]}])", "1"),
             "nnU-Net: '" + f + "': fold 1 has no 'train' list");
  for (const char* entry : {R"(["a", "b"])", R"("fold0")", "null", "{}"}) {
    EXPECT_HAS(error("[" + std::string(entry) + "]", "0"), "fold 0 has no 'train' list")
        << " (fold entry " << entry << ")";
  }
}

// A data folder holding `files` (empty: only their names matter).
NnunetDataset DataFolder(const TempDir& root, const Strings& files) {
  MakeDataset(root);
  NnunetDataset d = Find("Dataset001_Sample", root.path());
  for (const std::string& f : files) WriteText(d.data_dir + "/" + f, "");
  return d;
}

TEST(NnunetLayout, ListsB2ndCasesSortedWithTheirSegAndProperties) {
  TempDir root;
  const NnunetDataset d = DataFolder(
      root, {"case_002.b2nd", "case_002_seg.b2nd", "case_002.pkl", "case_000_seg.b2nd",
             "case_000.pkl", "case_000.b2nd", "dataset_properties.txt", "case_001.nii.gz"});
  const std::vector<NnunetCaseFiles> cases = ListNnunetCases(d);
  ASSERT_EQ(cases.size(), 2u);
  EXPECT_EQ(cases[0].name, "case_000");
  EXPECT_EQ(cases[1].name, "case_002");
  const std::string at = d.data_dir + "/";
  EXPECT_EQ(cases[1].files,
            (Strings{at + "case_002.b2nd", at + "case_002_seg.b2nd", at + "case_002.pkl"}));
}

TEST(NnunetLayout, ListsNpzCasesWithTheirProperties) {
  TempDir root;
  const NnunetDataset d = DataFolder(root, {"b.npz", "b.pkl", "a.npz", "a.pkl"});
  const std::vector<NnunetCaseFiles> cases = ListNnunetCases(d);
  ASSERT_EQ(cases.size(), 2u);
  EXPECT_EQ(cases[0].name, "a");
  EXPECT_EQ(cases[0].files, (Strings{d.data_dir + "/a.npz", d.data_dir + "/a.pkl"}));
  EXPECT_EQ(cases[1].name, "b");
}

TEST(NnunetLayout, CaseMissingAFileOrAFolderWithoutCasesIsRefused) {
  TempDir root;
  const NnunetDataset d = DataFolder(root, {"case_000.b2nd", "case_000_seg.b2nd", "case_000.pkl",
                                            "case_001.b2nd", "case_001_seg.b2nd"});
  const std::string pkl = UsageErrorOf([&] { ListNnunetCases(d); });
  EXPECT_HAS(pkl, "nnU-Net: case case_001 in '" + d.data_dir + "' has no case_001.pkl");
  EXPECT_HAS(pkl, "nnUNetv2_plan_and_preprocess -d 1 -c 3d_fullres");
  fs::remove(d.data_dir + "/case_001_seg.b2nd");
  EXPECT_HAS(UsageErrorOf([&] { ListNnunetCases(d); }),
             "case case_001 in '" + d.data_dir + "' has no case_001_seg.b2nd");
  TempDir other;
  const NnunetDataset empty = DataFolder(other, {"notes.txt"});
  EXPECT_HAS(UsageErrorOf([&] { ListNnunetCases(empty); }),
             "nnU-Net: '" + empty.data_dir + "' holds no preprocessed case (.b2nd or .npz)");
}

TEST(NnunetLayout, ReadsTheTrainAndValCasesOfAFold) {
  TempDir dir;
  WriteText(dir / "splits_final.json", R"([
    {"train": ["case_001", "case_002"], "val": ["case_000"]},
    {"train": ["case_000", "case_002"], "val": ["case_001"]}])");
  const NnunetFold zero = ReadNnunetFold(dir / "splits_final.json", "0");
  EXPECT_EQ(zero.train, (Strings{"case_001", "case_002"}));
  EXPECT_EQ(zero.val, (Strings{"case_000"}));
  const NnunetFold one = ReadNnunetFold(dir / "splits_final.json", "1");
  EXPECT_EQ(one.train, (Strings{"case_000", "case_002"}));
  EXPECT_EQ(one.val, (Strings{"case_001"}));
}

TEST(NnunetLayout, FoldAllHoldsNothingOutAndNeedsNoSplitsFile) {
  TempDir dir;
  const NnunetFold all = ReadNnunetFold(dir / "splits_final.json", "all");
  EXPECT_TRUE(all.train.empty());
  EXPECT_TRUE(all.val.empty());
}

TEST(NnunetLayout, FoldTheFileDoesNotHaveOrAMalformedFileIsRefused) {
  TempDir dir;
  const std::string f = dir / "splits_final.json";
  WriteText(f, R"([{"train": ["a"], "val": ["b"]}, {"train": ["b"], "val": ["a"]}])");
  for (const char* fold : {"2", "x", "-1"}) {
    EXPECT_HAS(UsageErrorOf([&] { ReadNnunetFold(f, fold); }),
               "data.fold = " + std::string(fold) + ": '" + f +
                   "' has folds 0..1; choose one of them or all");
  }
  WriteText(f, R"([{"train": ["a"], "val": ["b"})");
  EXPECT_HAS(UsageErrorOf([&] { ReadNnunetFold(f, "0"); }),
             "nnU-Net: '" + f + "' is not valid JSON");
  WriteText(f, R"({"train": ["a"], "val": ["b"]})");
  EXPECT_HAS(UsageErrorOf([&] { ReadNnunetFold(f, "0"); }), "'" + f + "' is not a list of folds");
  WriteText(f, R"([{"train": ["a"], "val": "b"}])");
  EXPECT_HAS(UsageErrorOf([&] { ReadNnunetFold(f, "0"); }), "fold 0 has no 'val' list");
  EXPECT_HAS(UsageErrorOf([&] { ReadNnunetFold(dir / "none.json", "0"); }),
             "nnU-Net: '" + (dir / "none.json") + "' is missing");
}

TEST(NnunetLayout, TrainerFolderJoinsTrainerPlansAndConfiguration) {
  EXPECT_EQ(NnunetTrainerFolder("nnUNetTrainer", "nnUNetPlans", "3d_fullres"),
            "nnUNetTrainer__nnUNetPlans__3d_fullres");
  EXPECT_EQ(NnunetTrainerFolder(kNnunetResultsTrainer, "nnUNetResEncUNetLPlans", "2d"),
            "nnUNetTrainerUnetPipeline__nnUNetResEncUNetLPlans__2d");
}

}  // namespace
}  // namespace nnunet_layout_test
}  // namespace up
