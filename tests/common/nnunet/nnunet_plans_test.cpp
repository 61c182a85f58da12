// nnU-Net plans (common/nnunet/nnunet_plans.h): the architecture, patch size,
// batch size and batch dice of a configuration, read from the committed plans
// (the ResEnc-L planner's output and the hand-written tiny plans) and from
// plans written here; every plan that cannot be built is one "config: ..."
// UsageError naming the entry; the architecture's text reads back the same.
#include "common/nnunet/nnunet_plans.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "common/base/errors.h"
#include "tests/common/nnunet/nnunet_test_support.h"
#include "tests/support/command.h"

namespace up {
namespace nnunet_plans_test {  // a unity batch shares one file scope
namespace {

using test::SourcePath;
using test::TempDir;
using Ints = std::vector<int>;
using Nested = std::vector<std::vector<int>>;

const std::string kResEncL = SourcePath("configs/nnunet/nnUNetResEncUNetLPlans.json");
const std::string kTiny = SourcePath("configs/nnunet/tiny_plans.json");

using nnunet_test::WriteText;

// The UsageError message of `f`, or "<no error>"; a plan's errors start
// "config: " (nnunet_test_support.h checks the one line and exit code 2).
std::string ErrorOf(const std::function<void()>& f) {
  const std::string message = nnunet_test::UsageErrorOf(f);
  if (message != "<no error>") {
    EXPECT_EQ(message.rfind("config: ", 0), 0u) << message;
  }
  return message;
}

// tiny_plans.json with `edit` applied to its configurations, written (as
// flow YAML, which the reader takes as it takes JSON) to dir/plans.json.
std::string EditedTiny(const TempDir& dir, const std::function<void(YAML::Node)>& edit) {
  YAML::Node root = YAML::LoadFile(kTiny);
  edit(root["configurations"]);
  YAML::Emitter out;
  out << YAML::Flow << root;
  WriteText(dir / "plans.json", out.c_str());
  return dir / "plans.json";
}

// The error of reading configuration `configuration` of the edited tiny plans.
std::string EditError(const std::string& configuration,
                      const std::function<void(YAML::Node)>& edit) {
  TempDir dir;
  const std::string path = EditedTiny(dir, edit);
  return ErrorOf([&] { ReadNnunetPlan(path, configuration); });
}

void ExpectSameArchitecture(const NnunetArchitecture& a, const NnunetArchitecture& b) {
  EXPECT_EQ(a.network_class, b.network_class);
  EXPECT_EQ(a.dims, b.dims);
  EXPECT_EQ(a.features, b.features);
  EXPECT_EQ(a.kernel_sizes, b.kernel_sizes);
  EXPECT_EQ(a.strides, b.strides);
  EXPECT_EQ(a.blocks, b.blocks);
  EXPECT_EQ(a.decoder_convs, b.decoder_convs);
  EXPECT_EQ(a.conv_bias, b.conv_bias);
  EXPECT_EQ(a.norm, b.norm);
  EXPECT_EQ(a.norm_eps, b.norm_eps);
  EXPECT_EQ(a.norm_momentum, b.norm_momentum);
  EXPECT_EQ(a.norm_affine, b.norm_affine);
  EXPECT_EQ(a.nonlin, b.nonlin);
  EXPECT_EQ(a.negative_slope, b.negative_slope);
}

// A PlainConvUNet in the shorthands dynamic_network_architectures takes (one
// value for every stage or axis), with no batch_size or batch_dice.
const char* kPlainPlan = R"({"configurations": {"2d": {
  "patch_size": [64, 48],
  "architecture": {
    "network_class_name": "PlainConvUNet",
    "arch_kwargs": {"n_stages": 3, "features_per_stage": [8, 16, 32],
      "conv_op": "torch.nn.Conv2d", "kernel_sizes": 3, "strides": [1, 2, [2, 1]],
      "n_conv_per_stage": 2, "n_conv_per_stage_decoder": [1, 3],
      "norm_op": "torch.nn.BatchNorm2d", "norm_op_kwargs": {"momentum": 0.25, "eps": 0.001},
      "dropout_op": null, "nonlin": "torch.nn.ReLU", "nonlin_kwargs": {"inplace": false}}}}}})";

TEST(NnunetPlans, ReadsTheResEncLPlannersThreeDFullres) {
  const NnunetPlan p = ReadNnunetPlan(kResEncL, "3d_fullres");
  const NnunetArchitecture& a = p.architecture;
  EXPECT_EQ(a.network_class, "ResidualEncoderUNet");
  EXPECT_EQ(a.dims, 3);
  EXPECT_EQ(a.stages(), 6);
  EXPECT_EQ(a.features, (Ints{32, 64, 128, 256, 320, 320}));
  EXPECT_EQ(a.kernel_sizes, Nested(6, Ints{3, 3, 3}));
  EXPECT_EQ(a.strides, (Nested{{1, 1, 1}, {2, 2, 2}, {2, 2, 2}, {2, 2, 2}, {2, 2, 2}, {2, 2, 2}}));
  EXPECT_EQ(a.blocks, (Ints{1, 3, 4, 6, 6, 6}));
  EXPECT_EQ(a.decoder_convs, (Ints{1, 1, 1, 1, 1}));
  EXPECT_TRUE(a.conv_bias);
  EXPECT_EQ(a.norm, "instance");
  EXPECT_DOUBLE_EQ(a.norm_eps, 1e-5);
  EXPECT_TRUE(a.norm_affine);
  EXPECT_EQ(a.nonlin, "leaky_relu");
  EXPECT_DOUBLE_EQ(a.negative_slope, 0.01);  // nonlin_kwargs has only inplace
  EXPECT_EQ(p.patch_size, (Ints{160, 192, 160}));
  EXPECT_EQ(p.batch_size, 3);
  EXPECT_FALSE(p.batch_dice);
}

TEST(NnunetPlans, ReadsTheResEncLPlannersTwoD) {
  const NnunetPlan p = ReadNnunetPlan(kResEncL, "2d");
  EXPECT_EQ(p.architecture.network_class, "ResidualEncoderUNet");
  EXPECT_EQ(p.architecture.dims, 2);
  EXPECT_EQ(p.architecture.features, (Ints{32, 64, 128, 256, 512, 512}));
  EXPECT_EQ(p.architecture.kernel_sizes, Nested(6, Ints{3, 3}));
  EXPECT_EQ(p.architecture.strides[0], (Ints{1, 1}));
  EXPECT_EQ(p.architecture.strides[5], (Ints{2, 2}));
  EXPECT_EQ(p.architecture.norm, "instance");
  EXPECT_EQ(p.patch_size, (Ints{192, 160}));
  EXPECT_EQ(p.batch_size, 301);
  EXPECT_TRUE(p.batch_dice);
}

TEST(NnunetPlans, ReadsEveryConfigurationOfTheTinyPlans) {
  const NnunetPlan plain2d = ReadNnunetPlan(kTiny, "2d");
  EXPECT_EQ(plain2d.architecture.network_class, "PlainConvUNet");
  EXPECT_EQ(plain2d.architecture.features, (Ints{4, 8, 16, 16}));
  EXPECT_EQ(plain2d.architecture.strides, (Nested{{1, 1}, {2, 2}, {2, 2}, {2, 1}}));
  EXPECT_EQ(plain2d.architecture.blocks, (Ints{2, 2, 2, 2}));
  EXPECT_EQ(plain2d.architecture.decoder_convs, (Ints{2, 2, 2}));
  EXPECT_EQ(plain2d.patch_size, (Ints{32, 16}));
  EXPECT_EQ(plain2d.batch_size, 4);
  EXPECT_TRUE(plain2d.batch_dice);

  const NnunetArchitecture res2d = ReadNnunetPlan(kTiny, "2d_res").architecture;
  EXPECT_EQ(res2d.network_class, "ResidualEncoderUNet");
  EXPECT_EQ(res2d.blocks, (Ints{1, 2, 2}));
  EXPECT_EQ(res2d.norm, "batch");
  EXPECT_DOUBLE_EQ(res2d.norm_momentum, 0.1);
  EXPECT_EQ(res2d.nonlin, "relu");

  const NnunetPlan res3d = ReadNnunetPlan(kTiny, "3d_fullres");
  EXPECT_EQ(res3d.architecture.kernel_sizes[0], (Ints{1, 3, 3}));
  EXPECT_EQ(res3d.architecture.strides[1], (Ints{1, 2, 2}));
  EXPECT_EQ(res3d.patch_size, (Ints{16, 32, 32}));
  EXPECT_EQ(res3d.batch_size, 2);
  EXPECT_FALSE(res3d.batch_dice);

  const NnunetArchitecture plain3d = ReadNnunetPlan(kTiny, "3d_plain").architecture;
  EXPECT_EQ(plain3d.network_class, "PlainConvUNet");
  EXPECT_EQ(plain3d.norm, "batch");
  EXPECT_FALSE(plain3d.conv_bias);
  EXPECT_EQ(plain3d.nonlin, "leaky_relu");
}

TEST(NnunetPlans, StageScaleMultipliesTheStridesUpToTheStage) {
  const NnunetArchitecture l = ReadNnunetPlan(kResEncL, "3d_fullres").architecture;
  EXPECT_EQ(StageScale(l, 0), (Ints{1, 1, 1}));
  EXPECT_EQ(StageScale(l, 1), (Ints{2, 2, 2}));
  EXPECT_EQ(StageScale(l, 5), (Ints{32, 32, 32}));
  const NnunetArchitecture t3 = ReadNnunetPlan(kTiny, "3d_fullres").architecture;
  EXPECT_EQ(StageScale(t3, 1), (Ints{1, 2, 2}));
  EXPECT_EQ(StageScale(t3, 2), (Ints{2, 4, 4}));
  EXPECT_EQ(StageScale(t3, 3), (Ints{4, 8, 8}));
  const NnunetArchitecture t2 = ReadNnunetPlan(kTiny, "2d").architecture;
  EXPECT_EQ(StageScale(t2, 3), (Ints{8, 4}));
}

TEST(NnunetPlans, ReadsAPlainConvUNetPlanWithShorthandsAndDefaults) {
  TempDir dir;
  WriteText(dir / "plain.json", kPlainPlan);
  const NnunetPlan p = ReadNnunetPlan(dir / "plain.json", "2d");
  const NnunetArchitecture& a = p.architecture;
  EXPECT_EQ(a.network_class, "PlainConvUNet");
  EXPECT_EQ(a.dims, 2);
  EXPECT_EQ(a.features, (Ints{8, 16, 32}));
  EXPECT_EQ(a.kernel_sizes, Nested(3, Ints{3, 3}));
  EXPECT_EQ(a.strides, (Nested{{1, 1}, {2, 2}, {2, 1}}));
  EXPECT_EQ(a.blocks, (Ints{2, 2, 2}));
  EXPECT_EQ(a.decoder_convs, (Ints{1, 3}));
  EXPECT_FALSE(a.conv_bias);
  EXPECT_EQ(a.norm, "batch");
  EXPECT_DOUBLE_EQ(a.norm_momentum, 0.25);
  EXPECT_DOUBLE_EQ(a.norm_eps, 0.001);
  EXPECT_TRUE(a.norm_affine);  // batch norm's default
  EXPECT_EQ(a.nonlin, "relu");
  EXPECT_EQ(p.patch_size, (Ints{64, 48}));
  EXPECT_EQ(p.batch_size, 2);
  EXPECT_TRUE(p.batch_dice);
}

TEST(NnunetPlans, InstanceNormWithoutAffineIsNotAffineAndNullOpsAreNone) {
  TempDir dir;
  const std::string path = EditedTiny(dir, [](YAML::Node c) {
    c["2d"]["architecture"]["arch_kwargs"]["norm_op_kwargs"].remove("affine");
    c["3d_plain"]["architecture"]["arch_kwargs"]["norm_op"] = YAML::Node(YAML::NodeType::Null);
    c["3d_plain"]["architecture"]["arch_kwargs"]["norm_op_kwargs"] =
        YAML::Node(YAML::NodeType::Null);
    c["3d_plain"]["architecture"]["arch_kwargs"]["nonlin"] = YAML::Node(YAML::NodeType::Null);
    c["3d_plain"]["architecture"]["arch_kwargs"]["nonlin_kwargs"] =
        YAML::Node(YAML::NodeType::Null);
  });
  const NnunetArchitecture instance = ReadNnunetPlan(path, "2d").architecture;
  EXPECT_EQ(instance.norm, "instance");
  EXPECT_FALSE(instance.norm_affine);  // torch's default for InstanceNorm
  const NnunetArchitecture bare = ReadNnunetPlan(path, "3d_plain").architecture;
  EXPECT_EQ(bare.norm, "none");
  EXPECT_EQ(bare.nonlin, "none");
}

TEST(NnunetPlans, ArchitectureTextReadsBackAsTheSameArchitecture) {
  TempDir dir;
  WriteText(dir / "plain.json", kPlainPlan);
  std::vector<NnunetArchitecture> all = {ReadNnunetPlan(dir / "plain.json", "2d").architecture};
  for (const char* c : {"2d", "3d_fullres"})
    all.push_back(ReadNnunetPlan(kResEncL, c).architecture);
  for (const char* c : {"2d", "2d_res", "3d_fullres", "3d_plain"})
    all.push_back(ReadNnunetPlan(kTiny, c).architecture);
  for (NnunetArchitecture a : all) {
    if (a.nonlin == "leaky_relu") a.negative_slope = 0.02;  // not the default, carried through
    const std::string text = NnunetArchitectureText(a);
    SCOPED_TRACE(text);
    const NnunetArchitecture back = ParseNnunetArchitecture(YAML::Load(text), "model.architecture");
    ExpectSameArchitecture(back, a);
    EXPECT_EQ(NnunetArchitectureText(back), text);
    EXPECT_HAS(text, a.network_class == "PlainConvUNet" ? "\"n_conv_per_stage\""
                                                        : "\"n_blocks_per_stage\"");
  }
}

TEST(NnunetPlans, MissingConfigurationNamesItAndTheOnesThePlansHave) {
  const std::string m = ErrorOf([] { ReadNnunetPlan(kTiny, "3d_lowres"); });
  EXPECT_HAS(m, "model.configuration = '3d_lowres'");
  EXPECT_HAS(m, "not in " + kTiny);
  EXPECT_HAS(m, "it has 2d, 2d_res, 3d_fullres, 3d_plain");
}

TEST(NnunetPlans, UnknownNetworkClassIsNamed) {
  const std::string m = EditError(
      "2d", [](YAML::Node c) { c["2d"]["architecture"]["network_class_name"] = "my.nets.UNETR"; });
  EXPECT_HAS(m, "configurations.2d.architecture.network_class_name: 'my.nets.UNETR' is not built");
  EXPECT_HAS(m, "PlainConvUNet and ResidualEncoderUNet");
}

TEST(NnunetPlans, UnknownArchitectureEntriesAreNamed) {
  const std::string extra = EditError("2d", [](YAML::Node c) {
    c["2d"]["architecture"]["arch_kwargs"]["deep_supervision"] = true;
  });
  EXPECT_HAS(extra,
             "2d.architecture.arch_kwargs.deep_supervision: not an argument of "
             "PlainConvUNet");
  // A residual encoder counts blocks, not convs.
  const std::string convs = EditError("2d_res", [](YAML::Node c) {
    c["2d_res"]["architecture"]["arch_kwargs"]["n_conv_per_stage"] = 2;
  });
  EXPECT_HAS(convs, "arch_kwargs.n_conv_per_stage: not an argument of ResidualEncoderUNet");
  const std::string top =
      EditError("2d", [](YAML::Node c) { c["2d"]["architecture"]["init_kwargs"] = "x"; });
  EXPECT_HAS(top, "2d.architecture.init_kwargs: not an entry of a plan's architecture");
  const std::string missing = EditError(
      "2d", [](YAML::Node c) { c["2d"]["architecture"]["arch_kwargs"].remove("strides"); });
  EXPECT_HAS(missing, "arch_kwargs.strides: missing");
}

TEST(NnunetPlans, UnsupportedOpsAreNamed) {
  auto with = [](const std::string& key, const std::string& value) {
    return EditError("2d",
                     [&](YAML::Node c) { c["2d"]["architecture"]["arch_kwargs"][key] = value; });
  };
  EXPECT_HAS(with("norm_op", "torch.nn.GroupNorm"),
             "arch_kwargs.norm_op: 'GroupNorm' is not built; supported: InstanceNorm2d");
  EXPECT_HAS(with("norm_op", "torch.nn.InstanceNorm3d"), "'InstanceNorm3d' is not built");
  EXPECT_HAS(with("nonlin", "torch.nn.GELU"), "arch_kwargs.nonlin: 'GELU' is not built");
  EXPECT_HAS(with("conv_op", "torch.nn.Conv1d"), "arch_kwargs.conv_op: 'Conv1d' is not built");
  EXPECT_HAS(with("dropout_op", "torch.nn.Dropout2d"), "arch_kwargs.dropout_op: ");
  EXPECT_HAS(with("dropout_op", "torch.nn.Dropout2d"), "dropout is not built");
  const std::string momentum = EditError("2d", [](YAML::Node c) {
    c["2d"]["architecture"]["arch_kwargs"]["norm_op_kwargs"]["momentum"] = 0.1;
  });
  EXPECT_HAS(momentum, "norm_op_kwargs.momentum: not supported for InstanceNorm2d");
}

TEST(NnunetPlans, ShapesThatDoNotFitTheStagesAreNamed) {
  auto kw = [](const std::string& key, const YAML::Node& value) {
    return EditError("2d",
                     [&](YAML::Node c) { c["2d"]["architecture"]["arch_kwargs"][key] = value; });
  };
  EXPECT_HAS(kw("features_per_stage", YAML::Load("[4, 8, 16]")),
             "arch_kwargs.features_per_stage: has 3 entries; expected 4 (one per stage)");
  EXPECT_HAS(kw("kernel_sizes", YAML::Load("[3, 3, 4, 3]")),
             "arch_kwargs.kernel_sizes[2]: [4, 4]: every kernel size must be odd");
  EXPECT_HAS(kw("strides", YAML::Load("[1, 2, 2, [2, 2, 2]]")), "has 3 axes; the conv_op is 2-D");
  EXPECT_HAS(kw("n_stages", YAML::Load("11")), "arch_kwargs.n_stages: 11: must be in [2, 10]");
  const std::string patch =
      EditError("2d", [](YAML::Node c) { c["2d"]["patch_size"] = YAML::Load("[32, 16, 8]"); });
  EXPECT_HAS(patch, "configurations.2d.patch_size: has 3 axes; the architecture is 2-D");
}

TEST(NnunetPlans, ConfigurationsInheritFromTheirParent) {
  TempDir dir;
  const std::string path = EditedTiny(dir, [](YAML::Node c) {
    c["3d_copy"]["inherits_from"] = "3d_fullres";
    c["loop_a"]["inherits_from"] = "loop_b";
    c["loop_b"]["inherits_from"] = "loop_a";
  });
  const NnunetPlan copy = ReadNnunetPlan(path, "3d_copy");
  const NnunetPlan parent = ReadNnunetPlan(kTiny, "3d_fullres");
  ExpectSameArchitecture(copy.architecture, parent.architecture);
  EXPECT_EQ(copy.patch_size, parent.patch_size);
  EXPECT_EQ(copy.batch_size, parent.batch_size);
  EXPECT_EQ(copy.batch_dice, parent.batch_dice);
  EXPECT_HAS(ErrorOf([&] { ReadNnunetPlan(path, "loop_a"); }),
             "configurations.loop_a: inherits_from 'loop_a', which is missing or circular");
}

// tiny_plans.json plus 3d_bs8 (3d_fullres with its own batch and patch size)
// and 3d_bs6, a child of 3d_bs8 with its own batch size only.
std::string TinyWithChildren(const TempDir& dir) {
  return EditedTiny(dir, [](YAML::Node c) {
    c["3d_bs8"]["inherits_from"] = "3d_fullres";
    c["3d_bs8"]["batch_size"] = 8;
    c["3d_bs8"]["patch_size"] = YAML::Load("[8, 16, 16]");
    c["3d_bs6"]["inherits_from"] = "3d_bs8";
    c["3d_bs6"]["batch_size"] = 6;
  });
}

TEST(NnunetPlans, ChildKeysOverrideItsParentsAndTheRestIsInherited) {
  TempDir dir;
  const std::string path = TinyWithChildren(dir);
  const NnunetPlan parent = ReadNnunetPlan(kTiny, "3d_fullres");
  const NnunetPlan child = ReadNnunetPlan(path, "3d_bs8");
  EXPECT_EQ(child.batch_size, 8);
  EXPECT_EQ(child.patch_size, (Ints{8, 16, 16}));
  ExpectSameArchitecture(child.architecture, parent.architecture);
  EXPECT_EQ(child.architecture.kernel_sizes[0], (Ints{1, 3, 3}));
  EXPECT_EQ(child.batch_dice, parent.batch_dice);
  // The parent, read from the same file, keeps its own keys.
  const NnunetPlan same = ReadNnunetPlan(path, "3d_fullres");
  EXPECT_EQ(same.batch_size, 2);
  EXPECT_EQ(same.patch_size, (Ints{16, 32, 32}));
  ExpectSameArchitecture(same.architecture, parent.architecture);
}

TEST(NnunetPlans, GrandchildTakesEachKeyFromTheNearestConfigurationSettingIt) {
  TempDir dir;
  const std::string path = TinyWithChildren(dir);
  const NnunetPlan parent = ReadNnunetPlan(kTiny, "3d_fullres");
  const NnunetPlan grandchild = ReadNnunetPlan(path, "3d_bs6");
  EXPECT_EQ(grandchild.batch_size, 6);                                   // its own
  EXPECT_EQ(grandchild.patch_size, (Ints{8, 16, 16}));                   // 3d_bs8's
  ExpectSameArchitecture(grandchild.architecture, parent.architecture);  // 3d_fullres's
  EXPECT_EQ(grandchild.batch_dice, parent.batch_dice);
  EXPECT_EQ(ReadNnunetPlan(path, "3d_bs8").batch_size, 8);
  EXPECT_EQ(ReadNnunetPlan(path, "3d_fullres").batch_size, 2);
}

TEST(NnunetPlans, MalformedOrMissingFilesAreNamed) {
  TempDir dir;
  WriteText(dir / "broken.json", R"({"configurations": {"2d": {"patch_size": [1, 2}})");
  const std::string broken = ErrorOf([&] { ReadNnunetPlan(dir / "broken.json", "2d"); });
  EXPECT_HAS(broken, "model.plans = '" + (dir / "broken.json") + "': not valid JSON");
  WriteText(dir / "other.json", R"({"dataset_name": "Dataset001_X"})");
  EXPECT_HAS(ErrorOf([&] { ReadNnunetPlan(dir / "other.json", "2d"); }),
             "has no 'configurations' mapping");
  EXPECT_HAS(ErrorOf([&] { ReadNnunetPlan(dir / "none.json", "2d"); }),
             "model.plans = '" + (dir / "none.json") + "': not a readable file");
  EXPECT_HAS(ErrorOf([&] { ReadNnunetPlan(dir.path(), "2d"); }), "not a readable file");
  EXPECT_HAS(ErrorOf([] { ParseNnunetArchitecture(YAML::Load("[1, 2]"), "model.architecture"); }),
             "config: model.architecture: expected a mapping");
}

}  // namespace
}  // namespace nnunet_plans_test
}  // namespace up
