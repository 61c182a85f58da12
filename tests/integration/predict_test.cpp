// What a newcomer does after the quick start, with the real binaries: write
// the sample data, train on its folder (pipeline) and its NIfTI cases, find
// the curves and the logs in the run folder, predict masks, export the
// weights and load them into a plain PyTorch U-Net in Python. Bad data and
// bad arguments fail with exit 2 and one clear line.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "common/config/config_file.h"
#include "common/formats/nifti_io.h"
#include "common/formats/png_io.h"
#include "common/model/tensor_file.h"
#include "common/model/unet.h"
#include "common/training/checkpoint.h"
#include "common/training/stage_optimizer.h"
#include "tests/support/command.h"
#include "tests/support/training_checks.h"

namespace up::test {
namespace {

namespace fs = std::filesystem;

size_t CountFiles(const std::string& dir, const std::string& suffix) {
  size_t n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() >= suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      ++n;
  }
  return n;
}

// Lines of `output` that say "error".
// One sample dataset and one trained pipeline run on its PNG folder, shared
// by the tests below (training is the slow part).
class SampleData : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    const CommandResult make = RunCommand(
        {"/usr/bin/env", "UP_BUILD_DIR=" + BinPath(".."), SourcePath("scripts/make-sample-data.sh"),
         *dir_ / "data", "--images", "12", "--cases", "2"},
        120);
    ASSERT_EQ(make.exit_code, 0) << make.output;
    const CommandResult train = Up({"train", "--config", SourcePath("configs/tiny.yaml"), "--set",
                                    "data.kind=folder", "--set", "data.path=" + *dir_ / "data",
                                    "--set", "train.steps=6", "--out", *dir_ / "run"});
    train_output_ = new std::string(train.output);
    ASSERT_EQ(train.exit_code, 0) << train.output;
  }
  static void TearDownTestSuite() {
    delete dir_;
    delete train_output_;
  }
  static std::string Data() { return *dir_ / "data"; }
  static std::string Run() { return *dir_ / "run"; }

  static TempDir* dir_;
  static std::string* train_output_;
};
TempDir* SampleData::dir_ = nullptr;
std::string* SampleData::train_output_ = nullptr;

TEST_F(SampleData, WritesImagesMasksAndCases) {
  EXPECT_EQ(CountFiles(Data() + "/images", ".png"), 12u);
  EXPECT_EQ(CountFiles(Data() + "/masks", ".png"), 12u);
  const PngImage image = ReadPng(Data() + "/images/sample-000.png");
  EXPECT_EQ(image.channels, 4);
  EXPECT_EQ(image.width, 64);
  const PngImage mask = ReadPng(Data() + "/masks/sample-000.png");
  EXPECT_EQ(mask.channels, 1);
  const std::set<uint8_t> classes(mask.pixels.begin(), mask.pixels.end());
  EXPECT_EQ(classes, (std::set<uint8_t>{0, 1, 2}));
  for (const char* s : {"flair", "t1", "t1ce", "t2", "seg"})
    EXPECT_TRUE(fs::exists(Data() + "/brats/case01/case01_" + s + ".nii.gz")) << s;
  const Volume seg = ReadNifti(Data() + "/brats/case00/case00_seg.nii.gz");
  const std::set<float> labels(seg.voxels.begin(), seg.voxels.end());
  EXPECT_EQ(labels, (std::set<float>{0, 1, 2, 4}));
  // The same cases in nnU-Net's raw layout: labels 0..3, one file per channel.
  EXPECT_TRUE(fs::exists(Data() + "/nnunet/dataset.json"));
  EXPECT_TRUE(fs::exists(Data() + "/nnunet/imagesTr/case01_0003.nii.gz"));
  const Volume nn = ReadNifti(Data() + "/nnunet/labelsTr/case00.nii.gz");
  EXPECT_EQ(std::set<float>(nn.voxels.begin(), nn.voxels.end()), (std::set<float>{0, 1, 2, 3}));
  EXPECT_EQ(ReadNifti(Data() + "/nnunet/imagesTr/case00_0000.nii.gz").voxels,
            ReadNifti(Data() + "/brats/case00/case00_flair.nii.gz").voxels);
}

TEST_F(SampleData, RunFolderHoldsCurvesAndPerProcessLogs) {
  const std::string svg = Slurp(Run() + "/curves.svg");
  ASSERT_FALSE(svg.empty()) << *train_output_;
  EXPECT_NE(svg.find("<polyline class=\"loss\""), std::string::npos);
  EXPECT_NE(svg.find("<polyline class=\"dice\""), std::string::npos);
  EXPECT_NE(train_output_->find("data: 12 samples"), std::string::npos) << *train_output_;
  // Not a terminal: plain progress lines, the first and the last step at least.
  EXPECT_NE(train_output_->find("step 1/6  loss"), std::string::npos) << *train_output_;
  EXPECT_NE(train_output_->find("step 6/6  loss"), std::string::npos) << *train_output_;
  EXPECT_NE(train_output_->find("eta "), std::string::npos) << *train_output_;
  for (const char* process : {"launcher", "encoder", "decoder"}) {
    const std::string log = Slurp(Run() + "/" + process + ".log");
    EXPECT_NE(log.find(std::string("[") + process + "]"), std::string::npos) << process << log;
  }
  EXPECT_NE(Slurp(Run() + "/launcher.log").find("step 6/6"), std::string::npos);
}

TEST_F(SampleData, PredictWritesMasksAndOverlays) {
  TempDir out;
  const CommandResult r =
      Up({"predict", "--checkpoint", Run(), "--input", Data() + "/images", "--out", out.path()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(CountFiles(out.path(), "_mask.png"), 12u) << r.output;
  EXPECT_EQ(CountFiles(out.path(), "_overlay.png"), 12u) << r.output;
  const PngImage mask = ReadPng(out / "sample-003_mask.png");
  EXPECT_EQ(mask.channels, 1);
  EXPECT_EQ(mask.width, 64);
  EXPECT_EQ(mask.height, 64);
  for (uint8_t v : mask.pixels) ASSERT_LT(v, 3);
  const PngImage overlay = ReadPng(out / "sample-003_overlay.png");
  EXPECT_EQ(overlay.channels, 3);

  // One file, from an explicit checkpoint folder, and the dataset root.
  TempDir one;
  const CommandResult single =
      Up({"predict", "--checkpoint", Run() + "/checkpoints/step-6", "--input",
          Data() + "/images/sample-005.png", "--out", one.path()});
  ASSERT_EQ(single.exit_code, 0) << single.output;
  EXPECT_EQ(CountFiles(one.path(), "_mask.png"), 1u);
  // Predicting from the same weights gives the same mask.
  EXPECT_EQ(ReadPng(one / "sample-005_mask.png").pixels,
            ReadPng(out / "sample-005_mask.png").pixels);
}

TEST_F(SampleData, PredictRefusesBadInputClearly) {
  TempDir out;
  const CommandResult none =
      Up({"predict", "--checkpoint", out / "nothing", "--input", Data(), "--out", out.path()});
  EXPECT_EQ(none.exit_code, 2) << none.output;
  ASSERT_EQ(ErrorLines(none.output).size(), 1u) << none.output;
  EXPECT_NE(none.output.find("neither a run folder"), std::string::npos) << none.output;

  PngImage rgb{64, 64, 3, std::vector<uint8_t>(64 * 64 * 3, 100)};
  WritePng(out / "rgb.png", rgb);
  const CommandResult channels =
      Up({"predict", "--checkpoint", Run(), "--input", out / "rgb.png", "--out", out / "p"});
  EXPECT_EQ(channels.exit_code, 2) << channels.output;
  EXPECT_NE(channels.output.find("has 3 channels but the model was trained on 4"),
            std::string::npos)
      << channels.output;
}

TEST_F(SampleData, ExportLoadsInPlainPyTorchUNet) {
  TempDir out;
  const CommandResult r = Up({"export", "--checkpoint", Run(), "--out", out / "model.pt"});
  ASSERT_EQ(r.exit_code, 0) << r.output;

  // The names and values are the checkpoint's, prefixed per half.
  const Config config = LoadConfig(Run() + "/config.yaml", {});
  UNetEncoder enc(config.model, 0);
  UNetDecoder dec(config.model, 0);
  StageOptimizer enc_opt(*enc, config.train), dec_opt(*dec, config.train);
  LoadStageFile(Run() + "/checkpoints/step-6/encoder.pt", *enc, enc_opt.optimizer());
  LoadStageFile(Run() + "/checkpoints/step-6/decoder.pt", *dec, dec_opt.optimizer());
  const NamedTensors exported = LoadTensorFile(out / "model.pt");
  NamedTensors expected;
  for (const auto& [n, t] : NamedState(*enc)) expected.emplace_back("encoder." + n, t);
  for (const auto& [n, t] : NamedState(*dec)) expected.emplace_back("decoder." + n, t);
  ASSERT_EQ(exported.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(exported[i].first, expected[i].first);
    EXPECT_TRUE(torch::equal(exported[i].second, expected[i].second)) << expected[i].first;
  }

  const std::string python = SourcePath(".venv/bin/python");
  if (access(python.c_str(), X_OK) != 0) GTEST_SKIP() << "no Python at " << python;
  if (RunCommand({python, "-c", "import torch"}, 60).exit_code != 0)
    GTEST_SKIP() << "torch does not import in " << python;

  // The C++ split model's logits on one input, for Python to reproduce.
  enc->eval();
  dec->eval();
  torch::NoGradGuard no_grad;
  const torch::Tensor input = torch::rand({2, 4, 64, 64});  // (N, C, H, W)
  const torch::Tensor logits = dec->forward(enc->forward(input))[0];
  SaveTensorFile(out / "io.pt", {{"input", input}, {"logits", logits}});
  const CommandResult py =
      RunCommand({python, "-W", "ignore", SourcePath("scripts/unet_reference.py"), out / "model.pt",
                  "--expect", out / "io.pt"},
                 120);
  EXPECT_EQ(py.exit_code, 0) << py.output;
  EXPECT_NE(py.output.find("loaded " + std::to_string(expected.size()) + " tensors"),
            std::string::npos)
      << py.output;
  EXPECT_NE(py.output.find("logits match"), std::string::npos) << py.output;

  // A tensor missing from the file: strict loading in Python must refuse it.
  NamedTensors cut;
  for (const auto& [n, t] : exported)
    if (n != "encoder.bottleneck.conv2.weight") cut.emplace_back(n, t);
  ASSERT_EQ(cut.size(), exported.size() - 1);
  SaveTensorFile(out / "cut.pt", cut);
  const CommandResult bad = RunCommand(
      {python, "-W", "ignore", SourcePath("scripts/unet_reference.py"), out / "cut.pt"}, 120);
  EXPECT_NE(bad.exit_code, 0) << bad.output;
  EXPECT_NE(bad.output.find("Missing key"), std::string::npos) << bad.output;
}

TEST_F(SampleData, BadFolderFilesFailBeforeTraining) {
  TempDir bad;
  fs::create_directories(bad / "images");
  fs::create_directories(bad / "masks");
  fs::copy_file(Data() + "/images/sample-000.png", bad / "images/a.png");
  fs::copy_file(Data() + "/masks/sample-000.png", bad / "masks/a.png");
  PngImage small{32, 32, 4, std::vector<uint8_t>(32 * 32 * 4, 7)};
  WritePng(bad / "images/b.png", small);
  fs::copy_file(Data() + "/masks/sample-000.png", bad / "masks/b.png");
  const CommandResult r =
      Up({"train", "--config", SourcePath("configs/tiny.yaml"), "--set", "data.kind=folder",
          "--set", "data.path=" + bad.path(), "--out", bad / "run"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  const auto errors = ErrorLines(r.output);
  ASSERT_EQ(errors.size(), 1u) << r.output;
  EXPECT_NE(errors[0].find("b.png' is 32x32 (HxW) but data.size is [64, 64]"), std::string::npos)
      << errors[0];
  EXPECT_EQ(r.output.find("stages up"), std::string::npos) << "no stage may start: " << r.output;

  // A mask without its image's name, and a file that is not a PNG.
  fs::remove(bad / "masks/b.png");
  const CommandResult unpaired =
      Up({"train", "--config", SourcePath("configs/tiny.yaml"), "--set", "data.kind=folder",
          "--set", "data.path=" + bad.path(), "--out", bad / "run2"});
  EXPECT_EQ(unpaired.exit_code, 2);
  EXPECT_NE(unpaired.output.find("has no mask"), std::string::npos) << unpaired.output;
  fs::remove(bad / "images/b.png");
  std::ofstream(bad / "images/a.png") << "garbage";
  const CommandResult corrupt =
      Up({"train", "--config", SourcePath("configs/tiny.yaml"), "--set", "data.kind=folder",
          "--set", "data.path=" + bad.path(), "--out", bad / "run3"});
  EXPECT_EQ(corrupt.exit_code, 2);
  EXPECT_NE(corrupt.output.find("is not a PNG file"), std::string::npos) << corrupt.output;
}

TEST_F(SampleData, NiftiCasesTrainAndPredict) {
  TempDir out;
  const CommandResult train =
      Up({"train", "--single-process",    "--config", SourcePath("configs/tiny3d.yaml"),
          "--set", "data.kind=nifti",     "--set",    "data.path=" + Data() + "/brats",
          "--set", "model.num_classes=4", "--set",    "model.features=[4,8]",
          "--set", "train.batch_size=2",  "--set",    "train.micro_batches=1",
          "--set", "train.steps=2",       "--out",    out / "run"});
  ASSERT_EQ(train.exit_code, 0) << train.output;
  EXPECT_TRUE(fs::exists(out / "run/curves.svg"));  // --single-process plots too

  const CommandResult r = Up({"predict", "--checkpoint", out / "run", "--input", Data() + "/brats",
                              "--out", out / "pred"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Volume seg = ReadNifti(out / "pred/case01_seg.nii.gz");
  EXPECT_EQ(seg.dims, (std::array<int64_t, 3>{40, 40, 40}));  // the case's own size
  for (float v : seg.voxels) ASSERT_TRUE(v == 0 || v == 1 || v == 2 || v == 4) << v;
  const PngImage slice = ReadPng(out / "pred/case01_mask.png");
  EXPECT_EQ(slice.width, 40);
  EXPECT_EQ(slice.channels, 1);
  EXPECT_EQ(ReadPng(out / "pred/case01_overlay.png").channels, 3);
  // The segmentation lies where the input does: same voxel grid, same qform
  // and sform (the sample cases are oriented as BraTS volumes are).
  const Volume flair = ReadNifti(Data() + "/brats/case01/case01_flair.nii.gz");
  EXPECT_EQ(flair.space.sform_code, 1);
  EXPECT_TRUE(seg.space == flair.space);

  // The same cases in nnU-Net's layout (an imagesTs-style folder of
  // CASE_0000.nii.gz ...): the same classes, written as CASE.nii.gz with
  // labels 0..3 as nnU-Net numbers them.
  const CommandResult nn = Up({"predict", "--checkpoint", out / "run", "--input",
                               Data() + "/nnunet/imagesTr", "--out", out / "nnpred"});
  ASSERT_EQ(nn.exit_code, 0) << nn.output;
  const Volume nseg = ReadNifti(out / "nnpred/case01.nii.gz");
  EXPECT_TRUE(nseg.space == ReadNifti(Data() + "/nnunet/imagesTr/case01_0000.nii.gz").space);
  ASSERT_EQ(nseg.voxels.size(), seg.voxels.size());
  size_t differ = 0;
  for (size_t i = 0; i < seg.voxels.size(); ++i)
    differ += nseg.voxels[i] != (seg.voxels[i] == 4 ? 3 : seg.voxels[i]);
  EXPECT_EQ(differ, 0u);
  TempDir partial;  // a case missing its last channel
  for (const char* k : {"0000", "0001", "0002"})
    fs::copy_file(Data() + "/nnunet/imagesTr/case01_" + k + ".nii.gz",
                  partial / ("case01_" + std::string(k) + ".nii.gz"));
  const CommandResult missing = Up(
      {"predict", "--checkpoint", out / "run", "--input", partial.path(), "--out", out / "nnbad"});
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.output.find("case 'case01' has no channel 3 image"), std::string::npos)
      << missing.output;
  EXPECT_EQ(seg.spacing, flair.spacing);
  // Predicted inside the brain's box (36^3 of the 40^3 case, as training
  // crops); a 32^3 window over it at overlap 0.5: 2 windows per axis.
  EXPECT_NE(r.output.find("case01: 40x40x40 (box 36x36x36), 8 windows"), std::string::npos)
      << r.output;

  // The blended logits are MONAI's sliding_window_inference over the same
  // network and input, plain and with test-time mirroring.
  const CommandResult exported =
      Up({"export", "--checkpoint", out / "run", "--out", out / "model.pt"});
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  const std::string python = SourcePath(".venv/bin/python");
  if (access(python.c_str(), X_OK) != 0) GTEST_SKIP() << "no Python at " << python;
  for (bool mirror : {false, true}) {
    const std::string dir = out / (mirror ? "mirrored" : "plain");
    std::vector<std::string> args = {
        "predict", "--checkpoint",  out / "run",       "--input", Data() + "/brats/case01", "--out",
        dir,       "--save-logits", "--sw-batch-size", "3"};
    if (mirror) args.push_back("--mirror");
    const CommandResult p = Up(args);
    ASSERT_EQ(p.exit_code, 0) << p.output;
    EXPECT_NE(p.output.find(mirror ? "8 windows (mirrored)" : "8 windows,"), std::string::npos)
        << p.output;
    std::vector<std::string> check = {python,
                                      "-W",
                                      "ignore",
                                      SourcePath("tests/support/sliding_window_parity.py"),
                                      out / "model.pt",
                                      dir + "/case01_logits.pt",
                                      "--roi",
                                      "32",
                                      "32",
                                      "32",
                                      "--sw-batch-size",
                                      "3"};
    if (mirror) check.push_back("--mirror");
    const CommandResult py = RunCommand(check, 300);
    EXPECT_EQ(py.exit_code, 0) << py.output;
    EXPECT_NE(py.output.find("logits match"), std::string::npos) << py.output;
  }
}

TEST_F(SampleData, PredictSlidesOverImagesLargerThanThePatchAsMonaiDoes) {
  TempDir out;
  // A 100x72 image: the 64x64 training patch slides over it (3 x 2 windows).
  torch::manual_seed(5);
  const torch::Tensor pixels = torch::randint(0, 256, {72, 100, 4}, torch::kUInt8).contiguous();
  WritePng(out / "wide.png",
           PngImage{100, 72, 4,
                    std::vector<uint8_t>(pixels.data_ptr<uint8_t>(),
                                         pixels.data_ptr<uint8_t>() + pixels.numel())});
  const CommandResult r = Up({"predict", "--checkpoint", Run(), "--input", out / "wide.png",
                              "--out", out / "pred", "--save-logits"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("wide.png: 100x72, 6 windows"), std::string::npos) << r.output;
  const PngImage mask = ReadPng(out / "pred/wide_mask.png");
  EXPECT_EQ(mask.width, 100);
  EXPECT_EQ(mask.height, 72);
  const NamedTensors saved = LoadTensorFile(out / "pred/wide_logits.pt");
  ASSERT_EQ(saved.size(), 2u);
  EXPECT_EQ(saved[0].first, "logits");
  EXPECT_EQ(saved[0].second.sizes(), (std::vector<int64_t>{3, 72, 100}));
  // The mask is the logits' argmax.
  const torch::Tensor classes = saved[0].second.argmax(0).to(torch::kUInt8).flatten();
  EXPECT_TRUE(torch::equal(classes, torch::from_blob(const_cast<uint8_t*>(mask.pixels.data()),
                                                     {72 * 100}, torch::kUInt8)));

  const CommandResult exported = Up({"export", "--checkpoint", Run(), "--out", out / "model.pt"});
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  const std::string python = SourcePath(".venv/bin/python");
  if (access(python.c_str(), X_OK) != 0) GTEST_SKIP() << "no Python at " << python;
  const CommandResult py =
      RunCommand({python, "-W", "ignore", SourcePath("tests/support/sliding_window_parity.py"),
                  out / "model.pt", out / "pred/wide_logits.pt", "--roi", "64", "64"},
                 300);
  EXPECT_EQ(py.exit_code, 0) << py.output;
  EXPECT_NE(py.output.find("logits match"), std::string::npos) << py.output;

  // Bad options: one line, exit 2.
  const CommandResult bad = Up({"predict", "--checkpoint", Run(), "--input", out / "wide.png",
                                "--out", out / "p2", "--overlap", "1"});
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--overlap 1: must be at least 0 and below 1"), std::string::npos)
      << bad.output;
}

// Random patches with foreground oversampling and every augmentation (the
// default for nifti) leave the pipeline bit-identical to single-process
// training, and resume exact: every process draws the same patch, made
// ahead by two loader threads in each process (data.workers).
TEST_F(SampleData, NiftiPatchesWithAugmentationTrainTheSameInThePipeline) {
  TempDir dir;
  ExpectPipelineEqualsSingleProcessAndResumeIsExact(
      SourcePath("configs/tiny3d.yaml"),
      {"data.kind=nifti", "data.path=" + Data() + "/brats", "model.num_classes=4",
       "model.features=[4,8]", "train.batch_size=4", "train.micro_batches=2", "train.steps=4",
       "checkpoint.every=2", "data.foreground_fraction=0.5", "data.workers=2", "train.threads=2"},
      dir.path());
  for (const char* run : {"single", "pipe"}) {
    const std::string metrics = Slurp(dir / (std::string(run) + "/metrics.jsonl"));
    const std::string wait = JsonField(metrics, "data_wait_s");
    ASSERT_FALSE(wait.empty()) << metrics;
    EXPECT_GE(std::stod(wait), 0.0);
  }
  const std::string dump = Slurp(dir / "single/config.yaml");
  EXPECT_NE(dump.find("augment: [scale, rotate, rot90, mirror, noise, blur, brightness, contrast, "
                      "lowres, gamma_inverted, gamma]"),
            std::string::npos)
      << dump;
  EXPECT_NE(dump.find("foreground_fraction: 0.5"), std::string::npos) << dump;
}

// A 2-D network on the volumes (nnU-Net's 2d way): trained on slices, the
// same in the pipeline as in one process, validated slice by slice, and
// `predict` segments whole volumes with it.
TEST_F(SampleData, TwoDNetworkTrainsOnSlicesAndPredictsVolumes) {
  TempDir dir;
  const std::vector<std::string> set{
      "--set", "data.kind=nifti",     "--set", "data.path=" + Data() + "/brats",
      "--set", "model.num_classes=4", "--set", "data.size=32",
      "--set", "train.steps=3",       "--set", "data.validation=[case01]",
      "--set", "validate.every=2"};
  std::vector<std::string> single{"train",    "--single-process",
                                  "--config", SourcePath("configs/tiny.yaml"),
                                  "--out",    dir / "single"};
  single.insert(single.end(), set.begin(), set.end());
  std::vector<std::string> pipe{"train", "--config", SourcePath("configs/tiny.yaml"), "--out",
                                dir / "pipe"};
  pipe.insert(pipe.end(), set.begin(), set.end());
  const CommandResult s1 = Up(single), p1 = Up(pipe);
  ASSERT_EQ(s1.exit_code, 0) << s1.output;
  ASSERT_EQ(p1.exit_code, 0) << p1.output;
  EXPECT_EQ(RunDigest(dir / "single"), RunDigest(dir / "pipe"));
  // Validated at steps 2 and 3, the same Dice through the stages.
  auto dice = [&](const std::string& run) {
    std::ifstream in(dir / (run + "/metrics.jsonl"));
    std::string line, out;
    while (std::getline(in, line))
      if (line.find("\"val_dice\"") != std::string::npos) out += JsonField(line, "val_dice") + ";";
    return out;
  };
  const std::string single_dice = dice("single");
  EXPECT_EQ(std::count(single_dice.begin(), single_dice.end(), ';'), 2) << single_dice;
  EXPECT_EQ(single_dice, dice("pipe"));

  const CommandResult r = Up({"predict", "--checkpoint", dir / "pipe", "--input",
                              Data() + "/brats/case01", "--out", dir / "pred"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(ReadNifti(dir / "pred/case01_seg.nii.gz").dims, (std::array<int64_t, 3>{40, 40, 40}));
  // The box's 36 slices, each with 2 x 2 windows of 32x32.
  EXPECT_NE(r.output.find("case01: 40x40x40 (box 36x36x36), 144 windows"), std::string::npos)
      << r.output;
}

TEST(NiftiConfig, AugmentationsAreNamedFromTheList) {
  const CommandResult r = Up({"train", "--config", SourcePath("configs/tiny.yaml"), "--set",
                              "data.augment=[mirror,sharpen]"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("data.augment"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(
                "'sharpen' is not one; expected a list of some of scale, rotate, rot90, mirror"),
            std::string::npos)
      << r.output;
  const CommandResult f = Up({"train", "--config", SourcePath("configs/tiny.yaml"), "--set",
                              "data.foreground_fraction=1.5"});
  EXPECT_EQ(f.exit_code, 2) << f.output;
  EXPECT_NE(f.output.find("data.foreground_fraction = 1.5: must be in [0, 1]"), std::string::npos)
      << f.output;
}

TEST(NiftiConfig, WrongModelForNiftiIsAConfigError) {
  const CommandResult r = Up({"train", "--config", SourcePath("configs/tiny.yaml"), "--set",
                              "data.kind=nifti", "--set", "data.path=/nonexistent"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("config: model.num_classes = 3: must be 4 when data.kind = nifti"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace up::test
