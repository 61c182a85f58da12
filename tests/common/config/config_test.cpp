// Tests for up::LoadConfig / LoadConfigFromString / DumpConfig: defaults, the
// merge order (defaults <- file <- --set overrides), every validation failure
// (each must throw up::UsageError with one "config: ..." line naming the key
// path and the value), unknown-key suggestions, bad files, and the dump round
// trip. Temp files live in a fresh mkdtemp directory removed after each test.
#include "common/config/config_file.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "common/base/errors.h"
#include "common/config/config_keys.h"

namespace up {
namespace {

#define EXPECT_HAS(message, piece) \
  EXPECT_NE((message).find(piece), std::string::npos) << "message: " << (message)

// The UsageError message from loading `yaml` (if non-empty) then `overrides`,
// or "<no error>". Checks the one-line "config: " form on the way.
std::string ErrorOf(const std::string& yaml, const std::vector<std::string>& overrides) {
  try {
    if (yaml.empty()) {
      LoadConfig("", overrides);
    } else {
      LoadConfigFromString(yaml, "test.yaml", overrides);
    }
  } catch (const UsageError& e) {
    std::string message = e.what();
    EXPECT_EQ(message.rfind("config: ", 0), 0u) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    EXPECT_EQ(e.exit_code(), 2);
    return message;
  }
  return "<no error>";
}

std::string SetError(const std::vector<std::string>& overrides) { return ErrorOf("", overrides); }

// Field-by-field equality, with the failing field named.
void ExpectSameConfig(const Config& a, const Config& b) {
  EXPECT_EQ(a.model.dims, b.model.dims);
  EXPECT_EQ(a.model.in_channels, b.model.in_channels);
  EXPECT_EQ(a.model.num_classes, b.model.num_classes);
  EXPECT_EQ(a.model.features, b.model.features);
  EXPECT_EQ(a.model.norm, b.model.norm);
  EXPECT_EQ(a.model.groups, b.model.groups);
  EXPECT_EQ(a.data.kind, b.data.kind);
  EXPECT_EQ(a.data.path, b.data.path);
  EXPECT_EQ(a.data.size, b.data.size);
  EXPECT_EQ(a.data.samples, b.data.samples);
  EXPECT_EQ(a.data.validation, b.data.validation);
  EXPECT_EQ(a.data.workers, b.data.workers);
  EXPECT_EQ(a.data.validation_cases, b.data.validation_cases);
  EXPECT_EQ(a.validate.every, b.validate.every);
  EXPECT_EQ(a.validate.overlap, b.validate.overlap);
  EXPECT_EQ(a.train.batch_size, b.train.batch_size);
  EXPECT_EQ(a.train.micro_batches, b.train.micro_batches);
  EXPECT_EQ(a.train.steps, b.train.steps);
  EXPECT_EQ(a.train.lr, b.train.lr);
  EXPECT_EQ(a.train.optimizer, b.train.optimizer);
  EXPECT_EQ(a.train.momentum, b.train.momentum);
  EXPECT_EQ(a.train.weight_decay, b.train.weight_decay);
  EXPECT_EQ(a.train.lr_schedule, b.train.lr_schedule);
  EXPECT_EQ(a.train.warmup_steps, b.train.warmup_steps);
  EXPECT_EQ(a.train.grad_clip, b.train.grad_clip);
  EXPECT_EQ(a.train.loss, b.train.loss);
  EXPECT_EQ(a.train.precision, b.train.precision);
  EXPECT_EQ(a.train.memory_budget, b.train.memory_budget);
  EXPECT_EQ(a.train.checkpointing, b.train.checkpointing);
  EXPECT_EQ(a.train.seed, b.train.seed);
  EXPECT_EQ(a.train.threads, b.train.threads);
  EXPECT_EQ(a.checkpoint.every, b.checkpoint.every);
  EXPECT_EQ(a.checkpoint.keep, b.checkpoint.keep);
  EXPECT_EQ(a.pipeline.transport, b.pipeline.transport);
  EXPECT_EQ(a.pipeline.activations, b.pipeline.activations);
  EXPECT_EQ(a.pipeline.recompute_unit, b.pipeline.recompute_unit);
  EXPECT_EQ(a.pipeline.schedule, b.pipeline.schedule);
  EXPECT_EQ(a.pipeline.lock, b.pipeline.lock);
  EXPECT_EQ(a.pipeline.park, b.pipeline.park);
  EXPECT_EQ(a.pipeline.timeout_s, b.pipeline.timeout_s);
  EXPECT_EQ(a.pipeline.encoder.device, b.pipeline.encoder.device);
  EXPECT_EQ(a.pipeline.encoder.node, b.pipeline.encoder.node);
  EXPECT_EQ(a.pipeline.decoder.device, b.pipeline.decoder.device);
  EXPECT_EQ(a.pipeline.decoder.node, b.pipeline.decoder.node);
}

class ConfigFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "config_test.XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& text) {
    std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  std::string FileError(const std::string& path) {
    try {
      LoadConfig(path, {});
    } catch (const UsageError& e) {
      return e.what();
    }
    return "<no error>";
  }

  std::filesystem::path dir_;
};

// --- Loading and merging ---------------------------------------------------

TEST(ConfigTest, MemoryBudgetTakesSizesAndBytes) {
  EXPECT_EQ(LoadConfig("", {}).train.memory_budget, 0) << "no budget unless asked";
  EXPECT_EQ(LoadConfig("", {"train.memory_budget=16GiB"}).train.memory_budget, 16LL << 30);
  EXPECT_EQ(LoadConfig("", {"train.memory_budget=1.5GB"}).train.memory_budget, 1500000000LL);
  EXPECT_EQ(LoadConfig("", {"train.memory_budget=1048576"}).train.memory_budget, 1LL << 20);
  EXPECT_EQ(LoadConfig("", {"train.memory_budget=null"}).train.memory_budget, 0);
  const std::string bad = ErrorOf("{}", {"train.memory_budget=lots"});
  EXPECT_NE(bad.find("train.memory_budget = lots"), std::string::npos) << bad;
  EXPECT_NE(bad.find("16GiB"), std::string::npos) << bad;
  EXPECT_NE(ErrorOf("{}", {"train.memory_budget=0"}).find("train.memory_budget"),
            std::string::npos);
  EXPECT_NE(ErrorOf("{}", {"train.checkpointing=all"}).find("off, levels, blocks"),
            std::string::npos);
  // Dumped and read back: the same bytes.
  const Config c = LoadConfig("", {"train.memory_budget=12GiB", "train.checkpointing=levels"});
  ExpectSameConfig(LoadConfigFromString(DumpConfig(c), "dump", {}), c);
}

// The recompute unit: block where the kind has blocks, only with recompute.
TEST(ConfigTest, RecomputeUnitAppliesOnlyWhereItCan) {
  EXPECT_EQ(LoadConfig("", {}).pipeline.recompute_unit, RecomputeUnit::kLevel);
  EXPECT_NE(DumpConfig(Config{}).find("recompute_unit: \"level\""), std::string::npos);
  const Config c =
      LoadConfig("", {"pipeline.activations=recompute", "pipeline.recompute_unit=block"});
  EXPECT_NE(DumpConfig(c).find("recompute_unit: \"block\""), std::string::npos) << DumpConfig(c);
  ExpectSameConfig(LoadConfigFromString(DumpConfig(c), "dump", {}), c);
  const std::string keep = ErrorOf("{}", {"pipeline.recompute_unit=block"});
  EXPECT_NE(keep.find("pipeline.recompute_unit = "), std::string::npos) << keep;
  EXPECT_NE(keep.find("pipeline.activations to recompute"), std::string::npos) << keep;
  EXPECT_NE(ErrorOf("{}", {"pipeline.recompute_unit=layer"}).find("level, block"),
            std::string::npos);
  EXPECT_EQ(LoadConfig("", {"train.checkpointing=blocks"}).train.checkpointing,
            Checkpointing::kBlocks);
}

// Offload parks what checkpointing or recompute keeps: on its own it is one
// clear line.
TEST(ConfigTest, OffloadNeedsSomethingToPark) {
  EXPECT_NE(DumpConfig(Config{}).find("  offload: \"off\""), std::string::npos);
  const std::string single = ErrorOf("{}", {"train.offload=on"});
  EXPECT_NE(single.find("train.offload = "), std::string::npos) << single;
  EXPECT_NE(single.find("set train.checkpointing to levels or blocks"), std::string::npos)
      << single;
  const std::string pipe = ErrorOf("{}", {"pipeline.offload=on"});
  EXPECT_NE(pipe.find("pipeline.offload = "), std::string::npos) << pipe;
  EXPECT_NE(pipe.find("set pipeline.activations to recompute"), std::string::npos) << pipe;
  const Config c = LoadConfig("", {"train.checkpointing=blocks", "train.offload=on",
                                   "pipeline.activations=recompute", "pipeline.offload=on"});
  EXPECT_EQ(c.train.offload, OnOff::kOn);
  EXPECT_EQ(c.pipeline.offload, OnOff::kOn);
  const Config back = LoadConfigFromString(DumpConfig(c), "dump", {});
  EXPECT_EQ(back.train.offload, OnOff::kOn);
  EXPECT_EQ(back.pipeline.offload, OnOff::kOn);
}

// validate.* applies only where cases are held out, so the dump writes it
// only then.
TEST(ConfigTest, ValidationIsAShareOrCaseNamesAndValidateAppliesOnlyWithIt) {
  EXPECT_NE(DumpConfig(Config{}).find("  validation: null\n"), std::string::npos);
  EXPECT_EQ(DumpConfig(Config{}).find("validate:"), std::string::npos);
  const Config share = LoadConfig("", {"data.validation=0.2", "validate.every=5"});
  EXPECT_DOUBLE_EQ(share.data.validation, 0.2);
  EXPECT_EQ(share.validate.every, 5);
  EXPECT_DOUBLE_EQ(share.validate.overlap, 0.5);
  ExpectSameConfig(LoadConfigFromString(DumpConfig(share), "dump", {}), share);
  const Config named = LoadConfig("", {"data.validation=[case01, BraTS_002]"});
  EXPECT_EQ(named.data.validation_cases, (std::vector<std::string>{"case01", "BraTS_002"}));
  EXPECT_NE(DumpConfig(named).find("validation: [\"case01\", \"BraTS_002\"]"), std::string::npos)
      << DumpConfig(named);
  ExpectSameConfig(LoadConfigFromString(DumpConfig(named), "dump", {}), named);
  EXPECT_NE(ErrorOf("{}", {"data.validation=1"}).find("data.validation = 1: must be in [0, 1)"),
            std::string::npos);
  EXPECT_NE(ErrorOf("{}", {"data.validation=[[a]]"}).find("a list of case names"),
            std::string::npos);
  EXPECT_NE(ErrorOf("{}", {"validate.overlap=0.5"})
                .find("validate.overlap = 0.5: there is no validation without data.validation"),
            std::string::npos);
  EXPECT_NE(ErrorOf("{}", {"data.validation=0.2", "validate.overlap=1"}).find("validate.overlap"),
            std::string::npos);
}

TEST(ConfigTest, AutoDevicesAreTheGpuWhenThereIsOneElseTheCpu) {
  Config c = LoadConfig("", {});
  EXPECT_EQ(c.pipeline.encoder.device, "auto");
  EXPECT_EQ(c.pipeline.decoder.device, "auto");
  AutoDevices a = ResolveAutoDevices(&c, 2, true);
  EXPECT_EQ(a.chosen, "cuda");
  EXPECT_EQ(c.pipeline.encoder.device, "cuda");
  EXPECT_EQ(c.pipeline.decoder.device, "cuda");
  EXPECT_NE(a.why.find("2 CUDA device(s)"), std::string::npos) << a.why;
  EXPECT_NE(a.why.find("take turns"), std::string::npos) << a.why;

  c = LoadConfig("", {"pipeline.stages.decoder.device=cuda:1"});
  a = ResolveAutoDevices(&c, 0, true);
  EXPECT_EQ(c.pipeline.encoder.device, "cpu");
  EXPECT_EQ(c.pipeline.decoder.device, "cuda:1") << "only auto is resolved";
  EXPECT_NE(a.why.find("sees no CUDA device"), std::string::npos) << a.why;
  a = ResolveAutoDevices(&c, 0, true);
  EXPECT_EQ(a.chosen, "") << "resolved once, nothing left to say";
  EXPECT_EQ(a.why, "");

  c = LoadConfig("", {"pipeline.encoder_parts=2", "pipeline.decoder_parts=2",
                      "pipeline.devices=[auto, cpu, auto, cuda]"});
  a = ResolveAutoDevices(&c, 0, false);
  EXPECT_EQ(c.pipeline.devices, (std::vector<std::string>{"cpu", "cpu", "cpu", "cuda"}));
  EXPECT_NE(a.why.find("built without CUDA"), std::string::npos) << a.why;
  EXPECT_THROW(LoadConfig("", {"pipeline.stages.encoder.device=gpu"}), UsageError);
}

TEST(ConfigTest, DefaultsLoad) { ExpectSameConfig(LoadConfig("", {}), Config{}); }

TEST(ConfigTest, EmptyMappingMeansDefaults) {
  ExpectSameConfig(LoadConfigFromString("{}", "t", {}), Config{});
}

TEST_F(ConfigFileTest, FileThenOverridesMergeAndOverrideWins) {
  std::string path = Write("run.yaml",
                           "train:\n  lr: 0.01\n  batch_size: 16\n  steps: 50\n"
                           "pipeline:\n  stages:\n    decoder:\n      device: cuda:1\n");
  Config c = LoadConfig(path, {"train.lr=1e-4", "train.micro_batches=4"});
  EXPECT_EQ(c.train.lr, 1e-4);
  EXPECT_EQ(c.train.batch_size, 16);
  EXPECT_EQ(c.train.steps, 50);
  EXPECT_EQ(c.train.micro_batches, 4);
  EXPECT_EQ(c.pipeline.decoder.device, "cuda:1");
  EXPECT_EQ(c.pipeline.encoder.device, "auto");
  EXPECT_EQ(c.model.features, (std::vector<int>{8, 16, 32, 64}));
}

TEST(ConfigTest, LaterOverrideWins) {
  EXPECT_EQ(LoadConfig("", {"train.steps=5", "train.steps=7"}).train.steps, 7);
}

TEST(ConfigTest, FeaturesListOverride) {
  Config c = LoadConfig("", {"model.features=[8,16,32]", "data.size=32"});
  EXPECT_EQ(c.model.features, (std::vector<int>{8, 16, 32}));
  EXPECT_EQ(c.data.size, (std::vector<int>{32, 32}));
}

TEST(ConfigTest, ScalarDataSizeExpandsToDims) {
  Config c = LoadConfig("", {"model.dims=3", "data.size=48", "model.features=[4,8,16]"});
  EXPECT_EQ(c.data.size, (std::vector<int>{48, 48, 48}));
}

TEST(ConfigTest, DefaultDataSizeFollowsDims) {
  EXPECT_EQ(LoadConfig("", {"model.dims=3"}).data.size, (std::vector<int>{64, 64, 64}));
}

TEST(ConfigTest, DataSizeListPerAxis) {
  EXPECT_EQ(LoadConfig("", {"data.size=[32, 48]"}).data.size, (std::vector<int>{32, 48}));
}

TEST(ConfigTest, SectionOverrideMergesKeys) {
  Config c = LoadConfig("", {"pipeline.stages.encoder={device: 'cuda:2', node: 1}"});
  EXPECT_EQ(c.pipeline.encoder.device, "cuda:2");
  EXPECT_EQ(c.pipeline.encoder.node, 1);
  EXPECT_EQ(c.pipeline.decoder.device, "auto");
}

TEST(ConfigTest, GradClipNullMeansOff) {
  EXPECT_EQ(LoadConfig("", {"train.grad_clip=2.5", "train.grad_clip=~"}).train.grad_clip, 0.0);
  EXPECT_EQ(LoadConfigFromString("train:\n  grad_clip: null\n", "t", {}).train.grad_clip, 0.0);
  EXPECT_EQ(LoadConfig("", {"train.grad_clip=1.5"}).train.grad_clip, 1.5);
}

TEST(ConfigTest, FloatFieldsAcceptIntegers) {
  Config c = LoadConfig("", {"train.lr=1", "pipeline.timeout_s=30"});
  EXPECT_EQ(c.train.lr, 1.0);
  EXPECT_EQ(c.pipeline.timeout_s, 30.0);
}

TEST(ConfigTest, SeedTakesFullUint64Range) {
  EXPECT_EQ(LoadConfig("", {"train.seed=18446744073709551615"}).train.seed,
            std::numeric_limits<uint64_t>::max());
}

TEST(ConfigTest, LockOnIsFineWithSequentialSchedule) {
  EXPECT_EQ(LoadConfig("", {"pipeline.lock=on"}).pipeline.lock, Lock::kOn);
}

TEST(ConfigTest, EmptySectionIsAllowed) {
  EXPECT_EQ(LoadConfigFromString("model:\ntrain:\n  steps: 3\n", "t", {}).train.steps, 3);
}

// --- Validation: the documented examples, exactly ---------------------------

TEST(ConfigValidationTest, BatchSizeNotDivisibleByMicroBatches) {
  EXPECT_EQ(SetError({"train.batch_size=10", "train.micro_batches=4"}),
            "config: train.batch_size = 10: must be divisible by train.micro_batches (4); "
            "nearest valid: 8 or 12");
}

TEST(ConfigValidationTest, BatchSizeNotDivisibleByReplicasTimesMicroBatches) {
  EXPECT_EQ(SetError({"train.batch_size=8", "train.micro_batches=2", "pipeline.replicas=3"}),
            "config: train.batch_size = 8: must be divisible by pipeline.replicas x "
            "train.micro_batches (3 x 2 = 6); nearest valid: 6 or 12");
  EXPECT_HAS(SetError({"pipeline.replicas=0"}), "pipeline.replicas = 0: must be in [1, 64]");
  const Config c = LoadConfig("", {"train.batch_size=12", "pipeline.replicas=3"});
  EXPECT_EQ(BatchMicroBatches(c), 6);
  EXPECT_EQ(MicroBatchSamples(c), 2);
}

TEST(ConfigValidationTest, DataSizeNotDivisibleByLevels) {
  EXPECT_EQ(ErrorOf("model:\n  features: [8, 16, 32]\ndata:\n  size: [100, 100]\n", {}),
            "config: data.size = [100, 100]: each spatial size must be divisible by 2^levels = 8 "
            "(model.features has 3 levels); nearest valid: 96 or 104");
}

TEST(ConfigValidationTest, UnknownKeySuggestsClosest) {
  EXPECT_EQ(
      ErrorOf("train:\n  bach_size: 8\n", {}),
      "config: unknown key 'train.bach_size'; did you mean 'train.batch_size' (an integer >= 1: "
      "samples per optimizer step)?");
}

TEST(ConfigValidationTest, DimsNotAnInteger) {
  EXPECT_EQ(ErrorOf("model:\n  dims: two\n", {}),
            "config: model.dims = \"two\": expected an integer (2 or 3)");
}

// --- Validation: types --------------------------------------------------------

TEST(ConfigValidationTest, IntegerRejectsFraction) {
  std::string m = SetError({"train.steps=2.5"});
  EXPECT_HAS(m, "train.steps = 2.5: expected an integer");
}

TEST(ConfigValidationTest, IntegerRejectsText) {
  std::string m = SetError({"train.batch_size=abc"});
  EXPECT_HAS(m, "train.batch_size = \"abc\": expected an integer");
}

TEST(ConfigValidationTest, IntegerRejectsBoolean) {
  std::string m = SetError({"train.threads=true"});
  EXPECT_HAS(m, "train.threads = \"true\": expected an integer");
}

TEST(ConfigValidationTest, IntegerRejectsQuotedNumber) {
  std::string m = ErrorOf("train:\n  steps: \"8\"\n", {});
  EXPECT_HAS(m, "train.steps = \"8\": expected an integer");
}

TEST(ConfigValidationTest, IntegerRejectsList) {
  std::string m = SetError({"model.groups=[4]"});
  EXPECT_HAS(m, "model.groups = [4]: expected an integer");
}

TEST(ConfigValidationTest, IntegerRejectsOverflow) {
  std::string m = SetError({"train.steps=99999999999999999999"});
  EXPECT_HAS(m, "train.steps = 99999999999999999999: must be >= 1");
}

TEST(ConfigValidationTest, FloatRejectsBoolean) {
  std::string m = SetError({"train.lr=false"});
  EXPECT_HAS(m, "train.lr = \"false\": expected a number");
}

TEST(ConfigValidationTest, FloatRejectsText) {
  std::string m = SetError({"train.weight_decay=lots"});
  EXPECT_HAS(m, "train.weight_decay = \"lots\": expected a number");
}

TEST(ConfigValidationTest, FloatRejectsInfinityAndNan) {
  EXPECT_HAS(SetError({"pipeline.timeout_s=.inf"}), "pipeline.timeout_s = \".inf\"");
  EXPECT_HAS(SetError({"train.lr=nan"}), "train.lr = ");
}

TEST(ConfigValidationTest, SeedRejectsNegative) {
  EXPECT_HAS(SetError({"train.seed=-1"}), "train.seed = -1: expected an integer");
}

TEST(ConfigValidationTest, SectionMustBeMapping) {
  std::string m = ErrorOf("model: 3\n", {});
  EXPECT_HAS(m, "model = 3: expected a mapping with keys kind, dims, in_channels");
}

// --- Validation: ranges -------------------------------------------------------

TEST(ConfigValidationTest, DimsOutOfRange) {
  EXPECT_EQ(SetError({"model.dims=4"}), "config: model.dims = 4: must be 2 or 3");
}

TEST(ConfigValidationTest, InChannelsAtLeastOne) {
  EXPECT_HAS(SetError({"model.in_channels=0"}), "model.in_channels = 0: must be >= 1");
}

TEST(ConfigValidationTest, NumClassesAtLeastTwo) {
  EXPECT_HAS(SetError({"model.num_classes=1"}), "model.num_classes = 1: must be >= 2");
}

TEST(ConfigValidationTest, FeaturesEmpty) {
  EXPECT_HAS(SetError({"model.features=[]"}), "model.features = []: must have 1 to 8 entries");
}

TEST(ConfigValidationTest, FeaturesTooMany) {
  EXPECT_HAS(SetError({"model.features=[1,1,1,1,1,1,1,1,1]"}),
             "model.features = [1, 1, 1, 1, 1, 1, 1, 1, 1]: must have 1 to 8 entries");
}

TEST(ConfigValidationTest, FeaturesEntryBelowOne) {
  EXPECT_HAS(SetError({"model.features=[8,0]"}), "model.features = [8, 0]: every entry");
}

TEST(ConfigValidationTest, FeaturesNotAList) {
  EXPECT_HAS(SetError({"model.features=8"}), "model.features = 8: expected a list");
}

TEST(ConfigValidationTest, GroupsAtLeastOne) {
  EXPECT_HAS(SetError({"model.groups=0"}), "model.groups = 0: must be >= 1");
}

TEST(ConfigValidationTest, GroupsMustDivideWidthsForGroupNorm) {
  std::string m = SetError({"model.norm=group", "model.groups=3"});
  EXPECT_HAS(m, "model.groups = 3: must divide every model.features entry");
  EXPECT_HAS(m, "nearest valid: 2 or 4");
}

TEST(ConfigValidationTest, GroupsNearestValidIsADivisorOfAllWidths) {
  std::string m = SetError({"model.norm=group", "model.features=[6,9]", "model.groups=2"});
  EXPECT_HAS(m, "model.groups = 2: must divide every model.features entry [6, 9]");
  EXPECT_HAS(m, "nearest valid: 1 or 3");
}

TEST(ConfigValidationTest, GroupsIgnoredForBatchNorm) {
  EXPECT_EQ(LoadConfig("", {"model.groups=3"}).model.groups, 3);
}

TEST(ConfigValidationTest, BadEnumValues) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"model.norm", "layer"},       {"data.kind", "video"},           {"train.optimizer", "adamw"},
      {"train.lr_schedule", "step"}, {"train.loss", "dice"},           {"train.precision", "fp8"},
      {"pipeline.transport", "tcp"}, {"pipeline.activations", "drop"}, {"pipeline.schedule", "zb"},
      {"pipeline.lock", "maybe"},    {"pipeline.park", "sometimes"},
  };
  for (const auto& [key, value] : cases) {
    std::string m = SetError({key + "=" + value});
    EXPECT_HAS(m, key + " = \"" + value + "\": expected one of ");
  }
}

TEST(ConfigValidationTest, DataSamplesAtLeastOne) {
  EXPECT_HAS(SetError({"data.samples=0"}), "data.samples = 0: must be >= 1");
}

TEST(ConfigValidationTest, FolderNeedsPath) {
  EXPECT_HAS(SetError({"data.kind=folder"}), "data.path = \"\": must name the dataset root");
  EXPECT_EQ(LoadConfig("", {"data.kind=folder", "data.path=/data/x"}).data.path, "/data/x");
}

TEST(ConfigOverrideTest, CommaSplitValuesAreJoinedBack) {
  // What cxxopts hands over for --set model.features=[8,16,32] --set data.path=/a,b --set x=1.
  EXPECT_EQ(RejoinOverrides({"model.features=[8", "16", "32]", "data.path=/a", "b", "x=1"}),
            (std::vector<std::string>{"model.features=[8,16,32]", "data.path=/a,b", "x=1"}));
  EXPECT_EQ(RejoinOverrides({"a={b: [1", "2]", "c: 3}", "d=4"}),
            (std::vector<std::string>{"a={b: [1,2],c: 3}", "d=4"}));
  EXPECT_TRUE(RejoinOverrides({}).empty());
  const Config c = LoadConfig("", RejoinOverrides({"model.features=[8", "16]", "data.size=32"}));
  EXPECT_EQ(c.model.features, (std::vector<int>{8, 16}));
}

TEST(ConfigValidationTest, FolderNeeds2d) {
  EXPECT_HAS(SetError({"data.kind=folder", "data.path=/d", "model.dims=3", "data.size=32"}),
             "model.dims = 3: must be 2 when data.kind = folder");
}

// Region-based training: BraTS' whole tumour, core and enhancing over the
// nifti classes 0..3; one output per region; errors name the key.
TEST(ConfigValidationTest, RegionsAreOneOutputEachAndNameTheirClasses) {
  const std::vector<std::string> brats{"data.kind=nifti",
                                       "data.path=/data/brats",
                                       "model.dims=3",
                                       "model.in_channels=4",
                                       "model.num_classes=3",
                                       "data.size=32",
                                       "model.regions=[[1,2,3],[1,3],[3]]",
                                       "model.regions_class_order=[2,1,3]"};
  const Config c = LoadConfig("", brats);
  EXPECT_EQ(c.model.regions, (std::vector<std::vector<int>>{{1, 2, 3}, {1, 3}, {3}}));
  EXPECT_EQ(MaskClasses(c.model), 4);
  EXPECT_NE(DumpConfig(c).find("regions: [[1, 2, 3], [1, 3], [3]]"), std::string::npos);
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> v = brats;
    v.insert(v.end(), extra.begin(), extra.end());
    return SetError(v);
  };
  EXPECT_HAS(with({"model.num_classes=4"}),
             "model.num_classes = 4: with model.regions the network has one output per region; "
             "set it to 3");
  EXPECT_HAS(with({"model.regions_class_order=[1,2]"}),
             "model.regions_class_order = [1, 2]: needs one class per region of model.regions (3)");
  EXPECT_HAS(
      with({"model.regions=[[1,2],[0]]", "model.num_classes=2", "model.regions_class_order=[1,2]"}),
      "expected a list of regions, each a list of the classes 1..255 it holds");
  EXPECT_HAS(
      with({"model.regions=[[1,2],[2]]", "model.num_classes=2", "model.regions_class_order=[1,2]"}),
      "must name classes up to 3 when data.kind = nifti");
  // One region is one output (a sigmoid), below the classes' two.
  EXPECT_EQ(LoadConfig("", {"model.regions=[[1,2]]", "model.num_classes=1",
                            "model.regions_class_order=[1]"})
                .model.num_classes,
            1);
  EXPECT_HAS(SetError({"model.regions_class_order=[1]"}),
             "model.regions_class_order = [1]: applies only with model.regions");
}

TEST(ConfigValidationTest, NiftiNeedsPathAndTheBratsModel) {
  const std::vector<std::string> brats{"data.kind=nifti", "model.dims=3", "model.in_channels=4",
                                       "model.num_classes=4", "data.size=32"};
  EXPECT_HAS(SetError(brats),
             "data.path = \"\": must name the dataset root when data.kind = nifti");
  std::vector<std::string> ok = brats;
  ok.push_back("data.path=/data/brats");
  EXPECT_EQ(LoadConfig("", ok).data.kind, DataKind::kNifti);
  auto with = [&](const std::string& extra) {
    std::vector<std::string> v = ok;
    v.push_back(extra);
    return SetError(v);
  };
  // A 2-D network trains on slices of the volumes.
  std::vector<std::string> slices = ok;
  slices.push_back("model.dims=2");
  EXPECT_EQ(LoadConfig("", slices).data.size, (std::vector<int>{32, 32}));
  EXPECT_HAS(with("model.in_channels=3"),
             "model.in_channels = 3: must be 4 when data.kind = nifti");
  EXPECT_HAS(with("model.num_classes=3"),
             "model.num_classes = 3: must be 4 when data.kind = nifti");
}

TEST(ConfigValidationTest, DataSizeWrongLength) {
  EXPECT_HAS(SetError({"data.size=[64,64,64]"}),
             "data.size = [64, 64, 64]: must have model.dims = 2 entries");
}

TEST(ConfigValidationTest, DataSizeEntryBelowOne) {
  EXPECT_HAS(SetError({"data.size=0"}), "data.size = 0: each spatial size must be an integer >= 1");
}

TEST(ConfigValidationTest, DataSizeNotIntegers) {
  EXPECT_HAS(SetError({"data.size=[64, big]"}), "data.size = [64, \"big\"]: expected an integer");
}

TEST(ConfigValidationTest, DataSizeScalarNotDivisible) {
  std::string m = SetError({"data.size=20"});
  EXPECT_HAS(m, "data.size = 20: each spatial size must be divisible by 2^levels = 16");
  EXPECT_HAS(m, "nearest valid: 16 or 32");
}

TEST(ConfigValidationTest, BatchSizeAtLeastOne) {
  EXPECT_HAS(SetError({"train.batch_size=0"}), "train.batch_size = 0: must be >= 1");
}

TEST(ConfigValidationTest, MicroBatchesAtLeastOne) {
  EXPECT_HAS(SetError({"train.micro_batches=0"}), "train.micro_batches = 0: must be >= 1");
}

TEST(ConfigValidationTest, MicroBatchesAtMostBatchSize) {
  EXPECT_HAS(SetError({"train.micro_batches=16"}),
             "train.micro_batches = 16: must be <= train.batch_size (8)");
}

TEST(ConfigValidationTest, StepsAtLeastOne) {
  EXPECT_HAS(SetError({"train.steps=0"}), "train.steps = 0: must be >= 1");
}

TEST(ConfigValidationTest, LrPositive) {
  EXPECT_HAS(SetError({"train.lr=0"}), "train.lr = 0: must be > 0");
  EXPECT_HAS(SetError({"train.lr=-1e-3"}), "train.lr = -1e-3: must be > 0");
}

TEST(ConfigValidationTest, MomentumBelowOne) {
  EXPECT_HAS(SetError({"train.momentum=1"}), "train.momentum = 1: must be in [0, 1)");
  EXPECT_HAS(SetError({"train.momentum=-0.5"}), "train.momentum = -0.5: must be in [0, 1)");
}

TEST(ConfigValidationTest, WeightDecayNonNegative) {
  EXPECT_HAS(SetError({"train.weight_decay=-0.1"}), "train.weight_decay = -0.1: must be >= 0");
}

TEST(ConfigValidationTest, WarmupNonNegative) {
  EXPECT_HAS(SetError({"train.warmup_steps=-1"}), "train.warmup_steps = -1: must be >= 0");
}

TEST(ConfigValidationTest, WarmupBelowSteps) {
  EXPECT_HAS(SetError({"train.warmup_steps=20"}),
             "train.warmup_steps = 20: must be < train.steps (20)");
}

TEST(ConfigValidationTest, GradClipNonNegative) {
  EXPECT_HAS(SetError({"train.grad_clip=-1"}), "train.grad_clip = -1: must be >= 0");
}

TEST(ConfigValidationTest, ThreadsInRange) {
  EXPECT_HAS(SetError({"train.threads=0"}), "train.threads = 0: must be in [1, 256]");
  EXPECT_HAS(SetError({"train.threads=257"}), "train.threads = 257: must be in [1, 256]");
}

TEST(ConfigValidationTest, CheckpointEveryNonNegative) {
  EXPECT_HAS(SetError({"checkpoint.every=-5"}), "checkpoint.every = -5: must be >= 0");
}

TEST(ConfigValidationTest, CheckpointKeepAtLeastOne) {
  EXPECT_HAS(SetError({"checkpoint.keep=0"}), "checkpoint.keep = 0: must be >= 1");
}

TEST(ConfigValidationTest, TimeoutPositive) {
  EXPECT_HAS(SetError({"pipeline.timeout_s=0"}), "pipeline.timeout_s = 0: must be > 0");
}

TEST(ConfigValidationTest, NodeNonNegative) {
  EXPECT_HAS(SetError({"pipeline.stages.decoder.node=-1"}),
             "pipeline.stages.decoder.node = -1: must be >= 0");
}

TEST(ConfigValidationTest, DeviceMustBeCpuOrCuda) {
  EXPECT_HAS(SetError({"pipeline.stages.encoder.device=gpu"}),
             "pipeline.stages.encoder.device = \"gpu\": expected auto, cpu, cuda or cuda:N");
  EXPECT_HAS(SetError({"pipeline.stages.encoder.device=cuda:x"}),
             "pipeline.stages.encoder.device = \"cuda:x\"");
  EXPECT_HAS(SetError({"pipeline.stages.encoder.device=cuda:-1"}),
             "pipeline.stages.encoder.device = \"cuda:-1\"");
  EXPECT_EQ(LoadConfig("", {"pipeline.stages.encoder.device=cuda"}).pipeline.encoder.device,
            "cuda");
}

TEST(ConfigValidationTest, OverlappedScheduleWithLockOn) {
  for (const std::string schedule : {"gpipe", "1f1b"}) {
    std::string m = SetError({"pipeline.schedule=" + schedule, "pipeline.lock=on"});
    EXPECT_HAS(m, "pipeline.lock = \"on\": cannot be on with pipeline.schedule = " + schedule);
  }
  EXPECT_EQ(LoadConfig("", {"pipeline.schedule=gpipe", "pipeline.lock=off"}).pipeline.schedule,
            Schedule::kGpipe);
}

// --- Unknown keys and bad input -----------------------------------------------

TEST(ConfigValidationTest, UnknownSectionSuggestsClosest) {
  EXPECT_HAS(ErrorOf("modle:\n  dims: 2\n", {}), "unknown key 'modle'; did you mean 'model'?");
}

TEST(ConfigValidationTest, MisplacedStageKeySuggestsStagesPath) {
  EXPECT_HAS(SetError({"pipeline.encoder.device=cuda"}),
             "did you mean 'pipeline.stages.encoder.device' (");
}

TEST(ConfigValidationTest, UnknownKeyFarFromAnyListsSiblings) {
  std::string m = ErrorOf("train:\n  zzzzzzzzzz: 1\n", {});
  EXPECT_HAS(m, "unknown key 'train.zzzzzzzzzz'; known keys under 'train': batch_size,");
  EXPECT_EQ(m.find("did you mean"), std::string::npos) << m;
}

TEST(ConfigValidationTest, OverrideOfUnknownKeyFails) {
  EXPECT_EQ(
      SetError({"train.bach_size=8"}),
      "config: unknown key 'train.bach_size'; did you mean 'train.batch_size' (an integer >= 1: "
      "samples per optimizer step)?");
}

TEST(ConfigValidationTest, OverrideBelowALeafFails) {
  EXPECT_HAS(SetError({"train.lr.x=1"}), "unknown key 'train.lr.x'");
}

TEST(ConfigValidationTest, OverrideWithoutEqualsFails) {
  EXPECT_HAS(SetError({"train.lr"}), "--set 'train.lr': expected key.path=value");
}

TEST(ConfigValidationTest, OverrideWithBadYamlFails) {
  EXPECT_HAS(SetError({"model.features=[8,16"}), "--set 'model.features=[8,16': not valid YAML");
}

TEST(ConfigValidationTest, DuplicateKeyFails) {
  EXPECT_HAS(ErrorOf("train:\n  steps: 3\n  steps: 4\n", {}), "duplicate key 'train.steps'");
}

TEST(ConfigValidationTest, MalformedYamlString) {
  std::string m = ErrorOf("model:\n  features: [8, 16\n", {});
  EXPECT_HAS(m, "config: test.yaml: not valid YAML: line ");
}

// yaml-cpp 0.7 loops forever on these (found by fuzz/config_fuzz): refused first.
TEST(ConfigValidationTest, StrayCommaIsAnErrorNotAHang) {
  for (const char* text :
       {",a", "{a: 1},", "[1, 2]\n,", "train: {steps: 3}\n,b\n", ",a\nb:\n c: 2}"}) {
    try {
      LoadConfigFromString(text, "x.yaml", {});
      ADD_FAILURE() << "accepted: " << text;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("',' outside [...] or {...}"), std::string::npos)
          << e.what();
    }
  }
  // Commas inside lists, maps, quotes, comments and plain scalars are fine.
  const Config c = LoadConfigFromString(
      "# a, comment\nmodel: {features: [4, 8], norm: \"batch\"}\ndata: {path: 'a,b', kind: "
      "synthetic}\n",
      "x.yaml", {});
  EXPECT_EQ(c.model.features, (std::vector<int>{4, 8}));
  EXPECT_EQ(c.data.path, "a,b");
}

TEST(ConfigValidationTest, TopLevelNotAMapping) {
  EXPECT_HAS(ErrorOf("- 1\n- 2\n", {}), "test.yaml: top level is a list; expected a mapping");
  EXPECT_HAS(ErrorOf("42\n", {}), "test.yaml: top level is a scalar; expected a mapping");
}

TEST(ConfigValidationTest, SeveralDocumentsFail) {
  EXPECT_HAS(ErrorOf("train:\n  steps: 3\n---\ntrain:\n  steps: 4\n", {}),
             "test.yaml: holds more than one YAML document (the second begins at line 3");
}

// yaml-cpp 0.7's LoadAll never returned on this (found by fuzz/config_fuzz):
// an anchor, then bytes no rule consumes; now one error line, at once.
TEST(ConfigValidationTest, TextTheParserCannotConsumeFailsInsteadOfLooping) {
  std::string text = "&9dat";
  text += std::string(14, '\xff') + "3, f" + std::string(4, '\xff') + std::string(40, '\xac');
  EXPECT_HAS(ErrorOf(text, {}), "test.yaml: not valid YAML: line 1, column");
}

TEST_F(ConfigFileTest, MalformedYamlFile) {
  std::string path = Write("bad.yaml", "train:\n  lr: [1,\n  steps: {\n");
  std::string m = FileError(path);
  EXPECT_HAS(m, "config: " + path + ": not valid YAML: line ");
  EXPECT_HAS(m, "column ");
}

TEST_F(ConfigFileTest, EmptyFile) {
  std::string path = Write("empty.yaml", "");
  EXPECT_HAS(FileError(path), "config: " + path + ": empty");
}

TEST_F(ConfigFileTest, CommentsOnlyFileIsEmpty) {
  std::string path = Write("comments.yaml", "# nothing here\n\n");
  EXPECT_HAS(FileError(path), "config: " + path + ": empty");
}

TEST_F(ConfigFileTest, MissingFile) {
  std::string path = (dir_ / "nope.yaml").string();
  EXPECT_EQ(FileError(path), "config: cannot read '" + path + "': No such file or directory");
}

TEST_F(ConfigFileTest, DirectoryIsNotReadable) {
  EXPECT_HAS(FileError(dir_.string()), "config: cannot read '" + dir_.string() + "': ");
}

// --- DumpConfig ---------------------------------------------------------------

Config UnusualConfig() {
  Config c;
  c.model.dims = 3;
  c.model.in_channels = 1;
  c.model.num_classes = 5;
  c.model.features = {6, 12, 24};
  c.model.norm = Norm::kGroup;
  c.model.groups = 3;
  c.data.kind = DataKind::kSynthetic;  // a path is kept even when the kind ignores it
  c.data.path = "/data/we\"ird: \\path #1\t\xc3\xa9";
  c.data.size = {16, 24, 32};
  c.data.samples = 7;
  c.train.batch_size = 12;
  c.train.micro_batches = 3;
  c.train.steps = 1000;
  c.train.lr = 0.1 + 0.2;
  c.train.optimizer = Optimizer::kSgd;
  c.train.momentum = 1.0 / 3.0;
  c.train.weight_decay = 5e-324;
  c.train.lr_schedule = LrSchedule::kCosine;
  c.train.warmup_steps = 999;
  c.train.grad_clip = 1e300;
  c.train.loss = LossKind::kCeDice;
  c.train.precision = Precision::kBf16;
  c.train.seed = std::numeric_limits<uint64_t>::max();
  c.train.threads = 256;
  c.checkpoint.every = 10;
  c.checkpoint.keep = 1;
  c.pipeline.transport = TransportKind::kNccl;
  c.pipeline.activations = Activations::kRecompute;
  c.pipeline.schedule = Schedule::k1f1b;
  c.pipeline.lock = Lock::kOff;
  c.pipeline.park = Park::kNever;
  c.pipeline.timeout_s = 0.001;
  c.pipeline.encoder = {"cuda:0", 0};
  c.pipeline.decoder = {"cuda:1", 3};
  return c;
}

TEST(ConfigDumpTest, DefaultsRoundTrip) {
  Config c = LoadConfig("", {});
  ExpectSameConfig(LoadConfigFromString(DumpConfig(c), "dump", {}), c);
}

TEST(ConfigDumpTest, UnusualValuesRoundTrip) {
  Config c = UnusualConfig();
  std::string dumped = DumpConfig(c);
  Config back = LoadConfigFromString(dumped, "dump", {});
  ExpectSameConfig(back, c);
  EXPECT_EQ(DumpConfig(back), dumped);
}

TEST_F(ConfigFileTest, DumpLoadsThroughLoadConfig) {
  Config c = UnusualConfig();
  ExpectSameConfig(LoadConfig(Write("resolved.yaml", DumpConfig(c)), {}), c);
}

TEST(ConfigDumpTest, DeterministicAndEveryKeyPresent) {
  std::string a = DumpConfig(UnusualConfig());
  EXPECT_EQ(a, DumpConfig(UnusualConfig()));
  for (const char* key :
       {"dims:",       "in_channels:",   "num_classes:", "features:",     "norm:",
        "groups:",     "kind:",          "path:",        "size:",         "samples:",
        "batch_size:", "micro_batches:", "steps:",       "lr:",           "optimizer:",
        "momentum:",   "weight_decay:",  "lr_schedule:", "warmup_steps:", "grad_clip:",
        "loss:",       "precision:",     "seed:",        "threads:",      "every:",
        "keep:",       "transport:",     "activations:", "schedule:",     "lock:",
        "park:",       "timeout_s:",     "stages:",      "encoder:",      "decoder:",
        "device:",     "node:"}) {
    EXPECT_HAS(a, std::string(key));
  }
}

TEST(ConfigDumpTest, DefaultsDumpIsStable) {
  std::string dumped = DumpConfig(Config{});
  EXPECT_HAS(dumped,
             "model:\n  kind: \"classic\"\n  dims: 2\n  in_channels: 4\n  num_classes: 3\n"
             "  features: [8, 16, 32, 64]\n");
  EXPECT_HAS(dumped, "  lr: 0.001\n");
  EXPECT_HAS(dumped, "  timeout_s: 120\n");
  EXPECT_HAS(dumped, "  stages:\n    encoder:\n      device: \"auto\"\n      node: 0\n");
}

}  // namespace
}  // namespace up

namespace up {
namespace {

TEST(ConfigTest, NnunetPresetIsNnunetTrainersRecipeAndKeysStillWin) {
  EXPECT_EQ(LoadConfig("", {}).train.preset, Preset::kNone);
  EXPECT_NE(DumpConfig(Config{}).find("  preset: \"none\"\n"), std::string::npos);
  const Config c = LoadConfig("", {"train.preset=nnunet"});
  EXPECT_EQ(c.train.optimizer, Optimizer::kSgd);
  EXPECT_DOUBLE_EQ(c.train.lr, 1e-2);
  EXPECT_DOUBLE_EQ(c.train.momentum, 0.99);
  EXPECT_TRUE(c.train.nesterov);
  EXPECT_DOUBLE_EQ(c.train.weight_decay, 3e-5);
  EXPECT_EQ(c.train.lr_schedule, LrSchedule::kPoly);
  EXPECT_DOUBLE_EQ(c.train.poly_exponent, 0.9);
  EXPECT_EQ(c.train.steps_per_epoch, 250);
  EXPECT_EQ(c.train.steps, 1000 * 250);
  EXPECT_DOUBLE_EQ(c.train.grad_clip, 12);
  EXPECT_EQ(c.train.loss, LossKind::kCeDice);
  EXPECT_EQ(c.train.micro_batches, 1);
  const std::string dump = DumpConfig(c);
  EXPECT_EQ(DumpConfig(LoadConfigFromString(dump, "dump", {})), dump);
  // Any key still overrides; train.epochs counts epochs of steps_per_epoch.
  const Config mine = LoadConfig("", {"train.preset=nnunet", "train.lr=0.1", "train.epochs=3"});
  EXPECT_DOUBLE_EQ(mine.train.lr, 0.1);
  EXPECT_EQ(mine.train.steps, 750);
  EXPECT_NE(ErrorOf("{}", {"train.epochs=3", "train.steps=5"}).find("not both"), std::string::npos);
  EXPECT_NE(ErrorOf("{}", {"train.nesterov=true"}).find("train.optimizer = sgd"),
            std::string::npos);
  EXPECT_NE(ErrorOf("{}", {"data.fold=1"}).find("applies only to data.kind = nnunet"),
            std::string::npos);
  EXPECT_NE(ErrorOf("{}", {"data.kind=nnunet", "data.dataset=1", "data.preprocessed=/nonexistent"})
                .find("nnUNetv2_plan_and_preprocess -d 1"),
            std::string::npos);
}

}  // namespace
}  // namespace up

namespace up {
namespace config_table_test {

// The compatibility hash covers what a run trains, not how long, how often
// it saves, validates or waits, nor where its files go.
TEST(ConfigHash, ChangesWithWhatTrainsAndOnlyWithThat) {
  const std::string base = ConfigHash(LoadConfig("", {}));
  EXPECT_EQ(base.size(), 64u);
  for (const char* same : {"train.steps=500", "checkpoint.every=5", "checkpoint.keep=1",
                           "pipeline.timeout_s=9", "data.workers=3", "train.memory_budget=1GiB",
                           // a key newer than runs that exist: at its default, no change
                           "model.memory=default"})
    EXPECT_EQ(ConfigHash(LoadConfig("", {same})), base) << same;
  for (const char* other :
       {"train.lr=0.01", "pipeline.activations=recompute", "train.seed=1", "model.features=[8, 16]",
        "data.size=32", "train.precision=bf16", "pipeline.schedule=gpipe", "train.micro_batches=4",
        "model.memory=lean"})
    EXPECT_NE(ConfigHash(LoadConfig("", {other})), base) << other;
  // Not the dump's hash: the dump also holds what the hash leaves out.
  const Config c = LoadConfig("", {"train.steps=500"});
  EXPECT_NE(DumpConfig(c), DumpConfig(LoadConfig("", {})));
}

// Every row's field holds its type, every key that applies is dumped and
// read back, and a choice key's default is one of its choices.
TEST(ConfigKeyTable, RowsAgreeWithTheirFieldsAndDefaults) {
  const Config defaults = LoadConfig("", {});
  const std::string dump = DumpConfig(defaults);
  for (const ConfigKey& key : ConfigKeyTable()) {
    EXPECT_FALSE(key.doc.empty()) << key.path;
    EXPECT_FALSE(key.Accepts().empty()) << key.path;
    const std::string text = KeyValueText(key, defaults);  // throws on a wrong field type
    if (key.type == KeyType::kChoice) {
      EXPECT_NE(std::find(key.choices.begin(), key.choices.end(), ShownDefault(key, defaults)),
                key.choices.end())
          << key.path << " default " << text;
    }
    const std::string last = key.path.substr(key.path.rfind('.') + 1);
    if (key.written && Applies(key.when, defaults)) {
      EXPECT_NE(dump.find(last + ": " + text + "\n"), std::string::npos) << key.path << "\n"
                                                                         << dump;
    }
  }
  EXPECT_EQ(FindConfigKey("train.lr")->Accepts(), "a number > 0");
  EXPECT_EQ(FindConfigKey("no.such"), nullptr);
}

// A key that does not apply to the config is refused with the row's When.
TEST(ConfigKeyTable, KeysOutsideTheirKindAreRefused) {
  try {
    LoadConfig("", {"model.path=/x"});
    FAIL() << "model.path was accepted for a classic model";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "model.path = \"/x\": applies only to model.kind = torchscript (model.kind is "
                  "classic)"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace config_table_test
}  // namespace up
