// model.kind = nnunet against its reference and through the pipeline:
//   - names, shapes and every deep-supervision output equal
//     dynamic_network_architectures 0.4.4's network built from the same plan
//     (scripts/nnunet_reference.py loads our export with strict=True), for
//     both classes in 2-D and 3-D;
//   - the ResEnc L plan has the reference's parameter count;
//   - the pipeline equals --single-process bit for bit, and resume equals an
//     uninterrupted run;
//   - plans we do not build exit 2 with one line naming the entry.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/base/errors.h"
#include "common/config/config_file.h"
#include "common/model/state_dict.h"
#include "common/model/tensor_file.h"
#include "common/model/unet.h"
#include "tests/support/command.h"
#include "tests/support/training_checks.h"

namespace up::test {
namespace {

std::string TinyPlans() { return SourcePath("configs/nnunet/tiny_plans.json"); }

std::vector<std::string> NnunetSet(const std::string& configuration) {
  return {"model.kind=nnunet", "model.plans=" + TinyPlans(), "model.configuration=" + configuration,
          "model.in_channels=2", "model.num_classes=3"};
}

// The reference's Python, or the reason it cannot run.
std::string ReferencePython(std::string* why) {
  const std::string python = SourcePath(".venv/bin/python");
  if (access(python.c_str(), X_OK) != 0) {
    *why = "no Python at " + python + " (scripts/install-deps.sh makes it)";
    return "";
  }
  if (RunCommand({python, "-c", "import dynamic_network_architectures"}, 60).exit_code != 0) {
    *why = "dynamic_network_architectures does not import in " + python +
           " (scripts/install-deps.sh installs it)";
    return "";
  }
  return python;
}

class NnunetParity : public ::testing::TestWithParam<const char*> {};

TEST_P(NnunetParity, NamesAndEveryOutputMatchTheReference) {
  std::string why;
  const std::string python = ReferencePython(&why);
  if (python.empty()) GTEST_SKIP() << why;
  const std::string configuration = GetParam();
  std::vector<std::string> set = NnunetSet(configuration);
  const Config config = LoadConfigFromString("{}", "test", set);
  ASSERT_TRUE(config.train.deep_supervision);

  UNet model(config.model, 3, /*deep_supervision=*/true);
  {
    // Away from nnU-Net's start (zeroed residual norms), so every path counts.
    torch::NoGradGuard no_grad;
    torch::manual_seed(11);
    for (auto& p : model->parameters()) p.add_(0.1 * torch::randn_like(p));
  }
  model->train();
  std::vector<int64_t> shape{2, 2};
  for (int s : config.data.size) shape.push_back(s);
  const torch::Tensor input = torch::randn(shape);  // (2, 2, *S)
  std::vector<torch::Tensor> outputs;
  {
    torch::NoGradGuard no_grad;
    outputs = model->forward(input);
  }
  ASSERT_EQ(static_cast<int>(outputs.size()), config.model.nnunet.stages() - 1);

  TempDir dir;
  const NamedTensors state = MergedStateDict(config.model, *model->encoder, *model->decoder);
  SaveTensorFile(dir / "model.pt", state);
  NamedTensors io{{"input", input}};
  for (size_t i = 0; i < outputs.size(); ++i)
    io.emplace_back("output" + std::to_string(i), outputs[i]);
  SaveTensorFile(dir / "io.pt", io);

  const CommandResult py = RunCommand(
      {python, "-W", "ignore", SourcePath("scripts/nnunet_reference.py"), dir / "model.pt",
       "--plans", TinyPlans(), "--configuration", configuration, "--in-channels", "2",
       "--num-classes", "3", "--deep-supervision", "--expect", dir / "io.pt"},
      300);
  EXPECT_EQ(py.exit_code, 0) << py.output;
  EXPECT_NE(py.output.find("loaded " + std::to_string(state.size()) + " tensors with strict=True"),
            std::string::npos)
      << py.output;
  EXPECT_NE(py.output.find("outputs match: " + std::to_string(outputs.size()) + " outputs"),
            std::string::npos)
      << py.output;

  // One tensor fewer: strict loading refuses it.
  NamedTensors cut(state.begin() + 1, state.end());
  SaveTensorFile(dir / "cut.pt", cut);
  const CommandResult bad = RunCommand(
      {python, "-W", "ignore", SourcePath("scripts/nnunet_reference.py"), dir / "cut.pt", "--plans",
       TinyPlans(), "--configuration", configuration, "--in-channels", "2", "--num-classes", "3"},
      300);
  EXPECT_NE(bad.exit_code, 0) << bad.output;
  EXPECT_NE(bad.output.find("Missing key"), std::string::npos) << bad.output;
}

INSTANTIATE_TEST_SUITE_P(Configurations, NnunetParity,
                         ::testing::Values("2d", "2d_res", "3d_fullres", "3d_plain"));

TEST(NnunetPlan, ResEncLHasTheReferenceParameterCount) {
  const Config config = LoadConfig(SourcePath("configs/nnunet-resenc-l.yaml"), {});
  EXPECT_EQ(config.model.nnunet.network_class, "ResidualEncoderUNet");
  EXPECT_EQ(config.data.size, (std::vector<int>{160, 192, 160}));
  const int64_t ours =
      ParameterCount(*UNetEncoder(config.model, 0)) + ParameterCount(*UNetDecoder(config.model, 0));
  std::string why;
  const std::string python = ReferencePython(&why);
  if (python.empty()) GTEST_SKIP() << why << "; ours has " << ours << " parameters";
  const CommandResult py =
      RunCommand({python, "-W", "ignore", "-c",
                  "import sys; sys.path.insert(0, '" + SourcePath("scripts") +
                      "'); from nnunet_reference import network_from_plans as n; "
                      "net = n(sys.argv[1], '3d_fullres', 4, 4, True); "
                      "print('parameters', sum(p.numel() for p in net.parameters()))",
                  SourcePath("configs/nnunet/nnUNetResEncUNetLPlans.json")},
                 300);
  ASSERT_EQ(py.exit_code, 0) << py.output;
  EXPECT_NE(py.output.find("parameters " + std::to_string(ours)), std::string::npos)
      << py.output << " (ours: " << ours << ")";
}

CommandResult Train(std::vector<std::string> args, const std::vector<std::string>& set) {
  args.insert(args.begin(), {BinPath("unet-pipeline"), "train", "--config",
                             SourcePath("tests/data/nnunet/empty.yaml")});
  for (const auto& s : set) {
    args.push_back("--set");
    args.push_back(s);
  }
  return RunCommand(args, 600);
}

class NnunetTraining : public ::testing::TestWithParam<const char*> {};

TEST_P(NnunetTraining, PipelineEqualsSingleProcessAndResumeIsExact) {
  std::vector<std::string> set = NnunetSet(GetParam());
  for (const char* s : {"train.steps=4", "train.loss=ce_dice", "train.micro_batches=2",
                        "train.grad_clip=1", "checkpoint.every=2"})
    set.push_back(s);
  TempDir dir;
  // The parts recompute block by block: each conv or residual block.
  ExpectPipelineEqualsSingleProcessAndResumeIsExact(
      SourcePath("tests/data/nnunet/empty.yaml"), set, dir.path(),
      {"pipeline.activations=recompute", "pipeline.recompute_unit=block"});
}

INSTANTIATE_TEST_SUITE_P(Configurations, NnunetTraining, ::testing::Values("2d", "3d_fullres"));

void ExpectPlanError(const std::string& edit_from, const std::string& edit_to,
                     const std::string& expected) {
  TempDir dir;
  std::string text = Slurp(TinyPlans());
  const size_t at = text.find(edit_from);
  ASSERT_NE(at, std::string::npos) << edit_from;
  text.replace(at, edit_from.size(), edit_to);
  std::ofstream(dir / "plans.json") << text;
  std::vector<std::string> set = NnunetSet("2d");
  set[1] = "model.plans=" + (dir / "plans.json");
  const CommandResult r = Train({"--out", dir / "run"}, set);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(expected), std::string::npos) << r.output;
  EXPECT_EQ(ErrorLines(r.output).size(), 1u) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "run"));
}

TEST(NnunetPlan, WhatWeDoNotBuildExitsTwoNamingIt) {
  ExpectPlanError("unet.PlainConvUNet", "unet.PlainConvUNetXL",
                  "network_class_name: 'dynamic_network_architectures.architectures.unet."
                  "PlainConvUNetXL' is not built");
  ExpectPlanError("\"n_stages\": 4,", "\"n_stages\": 4, \"squeeze_excitation\": true,",
                  "arch_kwargs.squeeze_excitation: not an argument of PlainConvUNet");
  ExpectPlanError("\"dropout_op\": null", "\"dropout_op\": \"torch.nn.modules.dropout.Dropout2d\"",
                  "arch_kwargs.dropout_op");
  ExpectPlanError("instancenorm.InstanceNorm2d", "normalization.LayerNorm",
                  "'LayerNorm' is not built");
}

TEST(NnunetPlan, ConfigErrorsNameTheKey) {
  auto error = [](const std::vector<std::string>& set) {
    try {
      LoadConfigFromString("{}", "test", set);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::vector<std::string> set = NnunetSet("3d_lowres");
  EXPECT_NE(error(set).find("model.configuration = '3d_lowres': not in"), std::string::npos)
      << error(set);
  set = NnunetSet("2d");
  set.push_back("model.features=[4,8]");
  EXPECT_NE(error(set).find("model.features"), std::string::npos) << error(set);
  set = NnunetSet("2d");
  set.push_back("data.size=[32,10]");
  EXPECT_NE(error(set).find("axis 1 must be divisible by 4"), std::string::npos) << error(set);
  EXPECT_NE(error({"train.deep_supervision=true"}).find("needs model.kind = nnunet"),
            std::string::npos);
  EXPECT_NE(error({"model.kind=nnunet"}).find("needs model.plans"), std::string::npos);
  // The plan's defaults, and a dumped config that stands without the plan.
  const Config c = LoadConfigFromString("{}", "test", NnunetSet("2d"));
  EXPECT_EQ(c.data.size, (std::vector<int>{32, 16}));
  EXPECT_EQ(c.train.batch_size, 4);
  EXPECT_EQ(c.model.dims, 2);
  const std::string dump = DumpConfig(c);
  EXPECT_EQ(dump.find("tiny_plans"), std::string::npos) << dump;
  EXPECT_EQ(DumpConfig(LoadConfigFromString(dump, "dump", {})), dump);
}

}  // namespace
}  // namespace up::test

namespace up::test {
namespace {

// .venv's Python when nnU-Net v2's predictor imports there, else "" and why.
std::string PredictorPython(std::string* why) {
  const std::string python = SourcePath(".venv/bin/python");
  if (access(python.c_str(), X_OK) != 0) {
    *why = "no Python at " + python + " (scripts/install-deps.sh makes it)";
    return "";
  }
  const CommandResult r = RunCommand(
      {python, "-c", "from nnunetv2.inference.predict_from_raw_data import nnUNetPredictor"}, 120);
  if (r.exit_code != 0) {
    *why = "nnunetv2's predictor does not import in " + python +
           " (scripts/install-deps.sh installs it): " + r.output.substr(0, 300);
    return "";
  }
  return python;
}

// A run on the tiny plan, exported as nnU-Net's trained-model folder, is
// loaded by nnU-Net v2's own predictor, which segments a case (two NIfTI
// channels, cropped to their non-zero box, z-scored, padded to the patch) as
// `unet-pipeline predict` does: every voxel the same, but where nnU-Net's
// half-precision sum of logits tips a near tie (the two largest of our
// logits within 0.05).
TEST(NnunetExport, NnunetsOwnPredictorSegmentsACaseAsPredictDoes) {
  std::string why;
  const std::string python = PredictorPython(&why);
  if (python.empty()) GTEST_SKIP() << why;
  TempDir dir;
  std::vector<std::string> set = NnunetSet("3d_fullres");
  set.push_back("train.steps=3");
  const CommandResult trained = Train({"--single-process", "--out", dir / "run"}, set);
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  const CommandResult exported =
      Up({"export", "--checkpoint", dir / "run", "--format", "nnunet", "--out", dir / "model"});
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  for (const char* file : {"plans.json", "dataset.json", "fold_0/checkpoint_final.pth"})
    EXPECT_TRUE(std::filesystem::exists(dir / "model/" + file)) << file;

  // The case: 40x36x14 voxels (x, y, z), non-zero in a 30x30x10 box.
  const std::string make_and_predict = R"(
import sys, os, numpy as np, nibabel as nib, torch
folder, images, out = sys.argv[1:4]
os.makedirs(images, exist_ok=True); os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(0)
for c in range(2):
    a = np.zeros((40, 36, 14), np.float32)
    a[4:34, 3:33, 2:12] = rng.normal(300 + 50 * c, 80, (30, 30, 10)).clip(1, None)
    nib.save(nib.Nifti1Image(a, np.eye(4)), f"{images}/case01_{c:04d}.nii.gz")
from nnunetv2.inference.predict_from_raw_data import nnUNetPredictor
p = nnUNetPredictor(tile_step_size=0.5, use_gaussian=True, use_mirroring=False,
                    device=torch.device("cpu"), verbose=False, allow_tqdm=False)
p.initialize_from_trained_model_folder(folder, use_folds=(0,))
p.predict_from_files_sequential([[f"{images}/case01_0000.nii.gz", f"{images}/case01_0001.nii.gz"]],
                                out + "/", save_probabilities=False, overwrite=True)
)";
  const CommandResult nn = RunCommand(
      {python, "-W", "ignore", "-c", make_and_predict, dir / "model", dir / "imagesTs", dir / "nn"},
      300);
  ASSERT_EQ(nn.exit_code, 0) << nn.output;
  const CommandResult ours = Up({"predict", "--checkpoint", dir / "run", "--input",
                                 dir / "imagesTs", "--out", dir / "up", "--save-logits"});
  ASSERT_EQ(ours.exit_code, 0) << ours.output;

  const std::string compare = R"(
import sys, numpy as np, nibabel as nib, torch
nn = np.asarray(nib.load(sys.argv[1] + "/case01.nii.gz").dataobj).transpose(2, 1, 0)  # (z, y, x)
up = np.asarray(nib.load(sys.argv[2] + "/case01.nii.gz").dataobj).transpose(2, 1, 0)
logits = torch.load(sys.argv[2] + "/case01_logits.pt", weights_only=True)["logits"].float()
top = logits.topk(2, 0).values
margin = np.zeros(nn.shape, np.float32) + np.inf
margin[2:12, 3:33, 4:34] = (top[0] - top[1]).numpy()  # the box, where the network ran
differ = nn != up
print("voxels", nn.size, "differ", int(differ.sum()), "agree", 1 - differ.mean(),
      "largest margin where they differ", float(margin[differ].max()) if differ.any() else 0.0)
print("classes", np.unique(up).tolist())
sys.exit(0 if (1 - differ.mean()) >= 0.995 and (not differ.any() or margin[differ].max() < 0.05)
         else 1)
)";
  const CommandResult same =
      RunCommand({python, "-W", "ignore", "-c", compare, dir / "nn", dir / "up"}, 120);
  EXPECT_EQ(same.exit_code, 0) << same.output;
  std::cout << same.output;

  // What it refuses, each one line with nothing written: a run of another
  // kind, a dataset.json that does not fit, a folder that holds something.
  const CommandResult classic =
      Train({"--single-process", "--out", dir / "classic"},
            {"model.kind=classic", "model.features=[4,8]", "data.size=32", "train.steps=1"});
  ASSERT_EQ(classic.exit_code, 0) << classic.output;
  std::ofstream(dir / "three-channels.json")
      << R"({"channel_names": {"0": "a", "1": "b", "2": "c"}, "labels": {"background": 0,)"
      << R"( "one": 1, "two": 2}, "file_ending": ".nii.gz"})";
  const std::vector<std::pair<std::vector<std::string>, std::string>> refused{
      {{"--checkpoint", dir / "classic", "--out", dir / "x"},
       "--format nnunet: the run trained model.kind classic"},
      {{"--checkpoint", dir / "run", "--out", dir / "y", "--dataset-json",
        dir / "three-channels.json"},
       "names 3 channels and 3 labels, but the model takes 2 channels"},
      {{"--checkpoint", dir / "run", "--out", dir / "model"}, "exists and is not empty"},
  };
  for (const auto& [args, says] : refused) {
    std::vector<std::string> a{"export", "--format", "nnunet"};
    a.insert(a.end(), args.begin(), args.end());
    const CommandResult r = Up(a);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find(says), std::string::npos) << r.output;
    EXPECT_EQ(ErrorLines(r.output).size(), 1u) << r.output;
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "x"));
  EXPECT_FALSE(std::filesystem::exists(dir / "y"));
}

}  // namespace
}  // namespace up::test
