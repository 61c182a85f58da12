// model.kind = torchscript: bundles that scripts/export_unet.py writes from
// the user's own PyTorch U-Net, trained through both trainers:
//   - 2-D (scripts/unet_reference.py's UNet, batch norm, all levels scripted)
//     and 3-D (dynamic_network_architectures' ResidualEncoderUNet from the
//     tiny plan, its residual levels traced, deep supervision): the pipeline
//     equals --single-process bit for bit, and resume equals an uninterrupted
//     run; `export` gives a state dict the user's module loads with
//     strict=True;
//   - MONAI DynUNet (3-D, instance norm) and BasicUNet (2-D, batch norm): 5
//     steps of the single-process trainer equal 5 steps of Python eager
//     training of the unsplit MONAI model on the same batches within 1e-5
//     relative (every loss, every weight);
//   - a bad bundle exits 2 with one line naming the file, before any process
//     starts and before a run folder exists.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/support/command.h"
#include "tests/support/training_checks.h"

namespace up::test {
namespace {

namespace fs = std::filesystem;

// .venv's Python if it imports every module named, or "" with the reason.
std::string PythonWith(const std::vector<std::string>& modules, std::string* why) {
  const std::string python = SourcePath(".venv/bin/python");
  if (access(python.c_str(), X_OK) != 0) {
    *why = "no Python at " + python + " (scripts/install-deps.sh makes it)";
    return "";
  }
  for (const std::string& m : modules) {
    if (RunCommand({python, "-c", "import " + m}, 120).exit_code != 0) {
      *why = m + " does not import in " + python + " (scripts/install-deps.sh installs it)";
      return "";
    }
  }
  return python;
}

// Runs scripts/export_unet.py FACTORY --kwargs KWARGS --example EXAMPLE --out DIR.
void ExportBundle(const std::string& python, const std::string& factory, const std::string& kwargs,
                  const std::string& example, const std::string& dir) {
  const CommandResult r = RunCommand({python, SourcePath("scripts/export_unet.py"), factory,
                                      "--kwargs", kwargs, "--example", example, "--out", dir},
                                     300);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_TRUE(fs::exists(dir + "/manifest.json")) << r.output;
}

CommandResult Launcher(std::vector<std::string> args, const std::vector<std::string>& set) {
  args.insert(args.begin(), BinPath("unet-pipeline"));
  for (const auto& s : set) {
    args.push_back("--set");
    args.push_back(s);
  }
  return RunCommand(args, 600);
}

CommandResult Train(std::vector<std::string> args, const std::vector<std::string>& set) {
  args.insert(args.begin(), {"train", "--config", SourcePath("tests/data/nnunet/empty.yaml")});
  return Launcher(args, set);
}

struct Case {
  const char* name;
  std::vector<std::string> modules;  // what the exporter imports
  const char* factory;
  std::string kwargs;
  const char* example;
  std::vector<std::string> set;  // beyond model.kind / model.path
};

std::vector<Case> TrainingCases() {
  const std::string plans = SourcePath("configs/nnunet/tiny_plans.json");
  return {
      {"classic2d",
       {},
       "unet_reference:UNet",
       R"({"dims": 2, "in_channels": 2, "num_classes": 3, "features": [4, 8], "norm": "batch"})",
       "1x2x32x32",
       {"data.size=32", "train.loss=ce_dice"}},
      {"resenc3d",
       {"dynamic_network_architectures"},
       "nnunet_reference:network_from_plans",
       R"({"plans_path": ")" + plans +
           R"(", "configuration": "3d_fullres", "in_channels": 2, "num_classes": 3, "deep_supervision": true})",
       "1x2x16x32x32",
       {"data.size=[16,32,32]", "train.deep_supervision=true"}},
  };
}

class TorchscriptTraining : public ::testing::TestWithParam<int> {};

TEST_P(TorchscriptTraining, PipelineEqualsSingleProcessResumeIsExactExportLoadsStrict) {
  const Case c = TrainingCases()[static_cast<size_t>(GetParam())];
  std::string why;
  const std::string python = PythonWith(c.modules, &why);
  if (python.empty()) GTEST_SKIP() << why;
  TempDir dir;
  ExportBundle(python, c.factory, c.kwargs, c.example, dir / "bundle");
  std::vector<std::string> set{"model.kind=torchscript", "model.path=" + (dir / "bundle"),
                               "train.steps=4",          "train.batch_size=4",
                               "train.micro_batches=2",  "train.grad_clip=1",
                               "checkpoint.every=2"};
  set.insert(set.end(), c.set.begin(), c.set.end());

  ExpectPipelineEqualsSingleProcessAndResumeIsExact(SourcePath("tests/data/nnunet/empty.yaml"), set,
                                                    dir.path());
  if (HasFatalFailure()) return;

  // A bundle's level is one opaque module: blocks are one clear line each.
  for (const std::vector<std::string>& blocks :
       {std::vector<std::string>{"--single-process", "--set", "train.checkpointing=blocks"},
        std::vector<std::string>{"--set", "pipeline.activations=recompute", "--set",
                                 "pipeline.recompute_unit=block"}}) {
    std::vector<std::string> args{"train", "--config", SourcePath("tests/data/nnunet/empty.yaml"),
                                  "--out", dir / "blocks"};
    args.insert(args.end(), blocks.begin(), blocks.end());
    const CommandResult r = Launcher(args, set);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find("torchscript bundle's level is one opaque module"), std::string::npos)
        << r.output;
    EXPECT_FALSE(std::filesystem::exists(dir / "blocks")) << "no run folder for a config error";
  }

  // The export holds the user's own keys: their unsplit module loads it.
  const CommandResult exported =
      Launcher({"export", "--checkpoint", dir / "pipe", "--out", dir / "model.pt"}, {});
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  EXPECT_NE(exported.output.find("strict=True"), std::string::npos) << exported.output;
  const CommandResult load = RunCommand(
      {python, "-W", "ignore", "-c",
       "import sys, json, importlib, torch; sys.path.insert(0, sys.argv[1]); "
       "m, _, f = sys.argv[2].partition(':'); "
       "net = getattr(importlib.import_module(m), f)(**json.loads(sys.argv[3])); "
       "sd = torch.load(sys.argv[4], weights_only=True); "
       "net.load_state_dict(sd, strict=True); print('strict load of', len(sd), 'tensors')",
       SourcePath("scripts"), c.factory, c.kwargs, dir / "model.pt"},
      300);
  EXPECT_EQ(load.exit_code, 0) << load.output;
  EXPECT_NE(load.output.find("strict load of"), std::string::npos) << load.output;
}

INSTANTIATE_TEST_SUITE_P(Models, TorchscriptTraining, ::testing::Values(0, 1),
                         [](const auto& info) {
                           return std::string(
                               TrainingCases()[static_cast<size_t>(info.param)].name);
                         });

struct MonaiCase {
  const char* name;
  const char* factory;
  const char* kwargs;
  const char* example;
  std::vector<std::string> set;
};

// BasicUNet without convolution biases: a bias right before BatchNorm has a
// gradient of exactly zero in exact arithmetic, so Adam turns its rounding
// noise into lr-sized steps in any two implementations, Python's two included.
std::vector<MonaiCase> MonaiCases() {
  return {
      {"DynUNet3d",
       "monai.networks.nets:DynUNet",
       R"({"spatial_dims": 3, "in_channels": 2, "out_channels": 3, "kernel_size": [3, 3, 3],
           "strides": [1, 2, 2], "upsample_kernel_size": [2, 2], "filters": [8, 16, 32],
           "norm_name": "instance"})",
       "1x2x16x16x16",
       {"data.size=16"}},
      {"BasicUNet2d",
       "monai.networks.nets:BasicUNet",
       R"({"spatial_dims": 2, "in_channels": 2, "out_channels": 3,
           "features": [8, 8, 16, 16, 32, 8], "norm": "batch", "bias": false})",
       "1x2x32x32",
       {"data.size=32"}},
  };
}

class MonaiParity : public ::testing::TestWithParam<int> {};

TEST_P(MonaiParity, FiveStepsEqualPythonEagerTrainingOfTheUnsplitModel) {
  const MonaiCase c = MonaiCases()[static_cast<size_t>(GetParam())];
  std::string why;
  const std::string python = PythonWith({"monai"}, &why);
  if (python.empty()) GTEST_SKIP() << why;
  TempDir dir;
  const std::string parity = SourcePath("tests/support/eager_parity.py");
  const CommandResult exp = RunCommand(
      {python, "-W", "ignore", parity, "export", c.factory, "--kwargs", c.kwargs, "--seed", "3",
       "--example", c.example, "--bundle", dir / "bundle", "--init", dir / "init.pt"},
      300);
  ASSERT_EQ(exp.exit_code, 0) << exp.output;
  std::vector<std::string> set{"model.kind=torchscript", "model.path=" + (dir / "bundle"),
                               "train.steps=5",          "train.batch_size=4",
                               "train.micro_batches=2",  "train.lr=0.001",
                               "train.loss=ce"};
  set.insert(set.end(), c.set.begin(), c.set.end());
  const std::string empty = SourcePath("tests/data/nnunet/empty.yaml");
  ASSERT_EQ(Launcher({"batches", "--config", empty, "--out", dir / "batches.pt"}, set).exit_code,
            0);
  const CommandResult run = Train({"--single-process", "--out", dir / "run"}, set);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  ASSERT_EQ(
      Launcher({"export", "--checkpoint", dir / "run", "--out", dir / "model.pt"}, {}).exit_code,
      0);
  const CommandResult eager = RunCommand({python,
                                          "-W",
                                          "ignore",
                                          parity,
                                          "train",
                                          c.factory,
                                          "--kwargs",
                                          c.kwargs,
                                          "--init",
                                          dir / "init.pt",
                                          "--batches",
                                          dir / "batches.pt",
                                          "--steps",
                                          "5",
                                          "--micro-batches",
                                          "2",
                                          "--lr",
                                          "0.001",
                                          "--metrics",
                                          dir / "run/metrics.jsonl",
                                          "--trained",
                                          dir / "model.pt",
                                          "--rtol",
                                          "1e-5"},
                                         600);
  EXPECT_EQ(eager.exit_code, 0) << eager.output;
  EXPECT_NE(eager.output.find("losses match: 5 steps"), std::string::npos) << eager.output;
  EXPECT_NE(eager.output.find("weights match"), std::string::npos) << eager.output;
  std::cout << eager.output;
}

INSTANTIATE_TEST_SUITE_P(Models, MonaiParity, ::testing::Values(0, 1), [](const auto& info) {
  return std::string(MonaiCases()[static_cast<size_t>(info.param)].name);
});

// A bundle of the 2-D reference U-Net, and what training it says.
class BadBundle : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    python_ = PythonWith({}, &why);
    if (python_.empty()) GTEST_SKIP() << why;
    ExportBundle(python_, "unet_reference:UNet",
                 R"({"dims": 2, "in_channels": 2, "num_classes": 3, "features": [4, 8]})",
                 "1x2x16x16", dir_ / "bundle");
    ExportBundle(python_, "unet_reference:UNet",
                 R"({"dims": 2, "in_channels": 2, "num_classes": 3, "features": [4, 16]})",
                 "1x2x16x16", dir_ / "other");
    manifest_ = Slurp(dir_ / "bundle/manifest.json");
  }

  void Expect(const std::string& expected, std::vector<std::string> extra = {}) {
    SCOPED_TRACE(expected);
    std::vector<std::string> set{"model.kind=torchscript", "model.path=" + (dir_ / "bundle"),
                                 "data.size=16", "train.steps=1"};
    set.insert(set.end(), extra.begin(), extra.end());
    const CommandResult r = Train({"--out", dir_ / "run"}, set);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find(expected), std::string::npos) << r.output;
    EXPECT_EQ(ErrorLines(r.output).size(), 1u) << r.output;
    EXPECT_FALSE(fs::exists(dir_ / "run")) << "a run folder for a run that never started";
    fs::remove_all(dir_ / "run");
  }

  // Runs `code` on the manifest's levels, by file name: L["decoder0.pt"]["inputs"] = ...
  void EditManifest(const std::string& code) {
    const CommandResult r =
        RunCommand({python_, "-c",
                    "import json, sys\n"
                    "p = sys.argv[1]; m = json.load(open(p)); o = json.load(open(sys.argv[2]))\n"
                    "L = {e['file']: e for k in ('encoder', 'decoder', 'heads') for e in m[k]}\n"
                    "O = {e['file']: e for k in ('encoder', 'decoder', 'heads') for e in o[k]}\n" +
                        code + "\njson.dump(m, open(p, 'w'), indent=1)",
                    dir_ / "bundle/manifest.json", dir_ / "other/manifest.json"},
                   60);
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }

  std::string python_;
  TempDir dir_;
  std::string manifest_;
};

TEST_F(BadBundle, EachMismatchExitsTwoNamingTheFile) {
  // Intact: it trains.
  const CommandResult ok = Train({"--single-process", "--out", dir_ / "ok"},
                                 {"model.kind=torchscript", "model.path=" + (dir_ / "bundle"),
                                  "data.size=16", "train.steps=1"});
  ASSERT_EQ(ok.exit_code, 0) << ok.output;

  Expect("model.path = '" + (dir_ / "bundle") + "x': not a folder",
         {"model.path=" + (dir_ / "bundle") + "x"});
  Expect("the bundle's first level takes 2 channels (model.path's manifest.json)",
         {"model.in_channels=4"});
  Expect("data.size = 10: axis 0 must be divisible by 4, the bundle's downsampling",
         {"data.size=10"});

  // A level file changed after export: size, then content.
  const std::string dec0 = dir_ / "bundle/decoder0.pt";
  const std::string saved = Slurp(dec0);
  std::ofstream(dec0, std::ios::app) << "x";
  Expect("decoder0.pt: " + std::to_string(saved.size() + 1) + " bytes, the manifest says " +
         std::to_string(saved.size()));
  std::string flipped = saved;
  flipped[flipped.size() / 2] ^= 1;
  std::ofstream(dec0, std::ios::binary | std::ios::trunc) << flipped;
  Expect("decoder0.pt: its SHA-256 is not the manifest's");
  std::ofstream(dec0, std::ios::binary | std::ios::trunc) << saved;

  // The manifest's shapes do not chain: skip 0 is 1x4x16x16.
  EditManifest("L['decoder0.pt']['inputs'][1] = [1, 4, 8, 8]");
  Expect("decoder0.pt: input 1 is 1x4x8x8, but skip 0 (encoder0.pt's output) is 1x4x16x16");
  std::ofstream(dir_ / "bundle/manifest.json") << manifest_;

  // Another model's level with its own size and hash: its weights are not the manifest's.
  EditManifest(
      "L['decoder1.pt'].update(bytes=O['decoder1.pt']['bytes'], "
      "sha256=O['decoder1.pt']['sha256'])");
  fs::copy_file(dir_ / "other/decoder1.pt", dir_ / "bundle/decoder1.pt",
                fs::copy_options::overwrite_existing);
  Expect("model.path: decoder1.pt: up.weight is 32x16x2x2 float32, the manifest says 16x8x2x2");
}

}  // namespace
}  // namespace up::test
