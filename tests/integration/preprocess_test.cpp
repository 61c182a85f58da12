// `unet-pipeline preprocess` and `data.kind: cache` with the real binary: a
// BraTS folder and an nnU-Net raw dataset become a cache of cropped,
// z-scored .npy arrays with their geometry; a second run does nothing; a
// damaged or outdated case is named and rebuilt; training from the cache is
// the same in the pipeline as single-process; bad raw data is one line and
// exit 2 naming the case and the file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>

#include "common/formats/nifti_io.h"
#include "common/formats/npy_io.h"
#include "tests/support/command.h"
#include "tests/support/training_checks.h"

namespace up::test {
namespace {

namespace fs = std::filesystem;

// An nnU-Net raw dataset: 2 channels ("T2", "ADC"), labels 0..2, `cases`
// cases of 20x24x28 voxels (x, y, z) with a zero border of 2 voxels, a
// box of label 1 and one of label 2.
void WriteNnunetRaw(const std::string& dir, int cases) {
  fs::create_directories(dir + "/imagesTr");
  fs::create_directories(dir + "/labelsTr");
  std::ofstream(dir + "/dataset.json")
      << R"({"channel_names": {"0": "T2", "1": "ADC"}, "labels": {"background": 0, )"
      << R"("lesion": 1, "organ": 2}, "numTraining": )" << cases
      << R"(, "file_ending": ".nii.gz"})";
  const int nx = 20, ny = 24, nz = 28;
  for (int c = 0; c < cases; ++c) {
    const std::string name = "case_" + std::to_string(c);
    Volume seg;
    seg.dims = {nx, ny, nz};
    seg.space.sform_code = 1;
    seg.space.srow = {{{0.5, 0, 0, -10}, {0, 0.5, 0, -12}, {0, 0, 2, 30}}};
    seg.voxels.assign(nx * ny * nz, 0);
    std::vector<Volume> ch(2, seg);
    size_t i = 0;
    for (int z = 0; z < nz; ++z)
      for (int y = 0; y < ny; ++y)
        for (int x = 0; x < nx; ++x, ++i) {
          const bool inside = x >= 2 && x < nx - 2 && y >= 2 && y < ny - 2 && z >= 2 && z < nz - 2;
          if (!inside) continue;
          const int label = (x < 8 && y < 10 && z < 12) ? 1 : (x > 12 && z > 14 + c) ? 2 : 0;
          seg.voxels[i] = static_cast<float>(label);
          ch[0].voxels[i] = static_cast<float>(100 + 50 * label + (x * 7 + y * 3 + z) % 11);
          ch[1].voxels[i] = static_cast<float>(300 - 40 * label + (x + y * 5 + z * 2) % 13);
        }
    for (int m = 0; m < 2; ++m)
      WriteNifti(dir + "/imagesTr/" + name + "_000" + std::to_string(m) + ".nii.gz", ch[m],
                 NiftiStorage::kFloat32);
    WriteNifti(dir + "/labelsTr/" + name + ".nii.gz", seg, NiftiStorage::kUInt8);
  }
}

std::vector<float> Floats(const std::string& npy) {
  std::vector<uint8_t> bytes;
  ReadNpy(npy, &bytes);
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

TEST(Preprocess, NnunetRawLayoutBecomesACacheThatTrainsTheSameInThePipeline) {
  TempDir dir;
  WriteNnunetRaw(dir / "raw", 3);
  const CommandResult r = Up({"preprocess", "--input", dir / "raw", "--out", dir / "cache"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("3 nnunet cases into"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("(3 written, 0 rebuilt, 0 up to date); 2 channels, 3 classes"),
            std::string::npos)
      << r.output;

  // Cropped to the non-zero box: 2 voxels off every side; (C, D, H, W) = (2, 24, 20, 16).
  const NpyHeader image = ReadNpyHeader(dir / "cache/case_0/image.npy");
  EXPECT_EQ(image.shape, (std::vector<int64_t>{2, 24, 20, 16}));
  EXPECT_EQ(ReadNpyHeader(dir / "cache/case_0/labels.npy").shape,
            (std::vector<int64_t>{24, 20, 16}));
  const std::string meta = Slurp(dir / "cache/case_0/case.json");
  EXPECT_NE(meta.find("\"original_shape\":[28,24,20]"), std::string::npos) << meta;
  EXPECT_NE(meta.find("\"crop_begin\":[2,2,2]"), std::string::npos) << meta;
  EXPECT_NE(meta.find("\"srow\":[[0.5,0,0,-10],[0,0.5,0,-12],[0,0,2,30]]"), std::string::npos)
      << meta;
  EXPECT_NE(meta.find("\"class_locations\":{\"1\":["), std::string::npos) << meta;
  // Each channel z-scored over its non-zero voxels.
  const std::vector<float> v = Floats(dir / "cache/case_0/image.npy");
  const size_t per = v.size() / 2;
  double sum = 0, sq = 0;
  for (size_t i = 0; i < per; ++i) sum += v[i], sq += double(v[i]) * v[i];
  EXPECT_NEAR(sum / per, 0.0, 1e-3);
  EXPECT_NEAR(sq / per, 1.0, 1e-2);
  EXPECT_NE(
      Slurp(dir / "cache/cache.json").find("\"class_names\":[\"background\",\"lesion\",\"organ\"]"),
      std::string::npos);

  // Training from it: the pipeline equals single-process, resume exact.
  ExpectPipelineEqualsSingleProcessAndResumeIsExact(
      SourcePath("configs/tiny3d.yaml"),
      {"data.kind=cache", "data.path=" + dir / "cache", "model.in_channels=2",
       "model.num_classes=3", "model.features=[4,8]", "data.size=[16,16,16]", "train.batch_size=4",
       "train.micro_batches=2", "train.steps=4", "checkpoint.every=2"},
      dir / "runs");

  // Predicting a cached case: the segmentation on the raw volume's grid and
  // orientation, the crop undone (background outside the box), labels as declared.
  const CommandResult p = Up({"predict", "--checkpoint", dir / "runs/single", "--input",
                              dir / "cache", "--out", dir / "pred"});
  ASSERT_EQ(p.exit_code, 0) << p.output;
  EXPECT_NE(p.output.find("case_2: 20x24x28 (box 16x20x24)"), std::string::npos) << p.output;
  const Volume seg = ReadNifti(dir / "pred/case_2_seg.nii.gz");
  const Volume raw = ReadNifti(dir / "raw/imagesTr/case_2_0000.nii.gz");
  EXPECT_EQ(seg.dims, raw.dims);
  EXPECT_TRUE(seg.space == raw.space);
  for (size_t i = 0; i < seg.voxels.size(); ++i) {
    ASSERT_TRUE(seg.voxels[i] == 0 || seg.voxels[i] == 1 || seg.voxels[i] == 2) << seg.voxels[i];
    if (raw.voxels[i] == 0) {
      ASSERT_EQ(seg.voxels[i], 0) << "outside the box, voxel " << i;
    }
  }

  // A model that does not fit the cache: one line naming the key.
  const CommandResult wrong = Up({"train", "--config", SourcePath("configs/tiny3d.yaml"), "--set",
                                  "data.kind=cache", "--set", "data.path=" + dir / "cache", "--set",
                                  "model.num_classes=3", "--out", dir / "wrong"});
  EXPECT_EQ(wrong.exit_code, 2) << wrong.output;
  EXPECT_NE(wrong.output.find("has 2 channels but model.in_channels = 4"), std::string::npos)
      << wrong.output;
}

TEST(Preprocess, ASecondRunDoesNothingAndDamagedOrChangedCasesAreRebuilt) {
  TempDir dir;
  const CommandResult make = RunCommand(
      {"/usr/bin/env", "UP_BUILD_DIR=" + BinPath(".."), SourcePath("scripts/make-sample-data.sh"),
       dir / "data", "--images", "1", "--cases", "2"},
      120);
  ASSERT_EQ(make.exit_code, 0) << make.output;
  const std::vector<std::string> run = {"preprocess", "--input", dir / "data/brats", "--out",
                                        dir / "cache"};
  ASSERT_EQ(Up(run).exit_code, 0);
  const CommandResult again = Up(run);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("(0 written, 0 rebuilt, 2 up to date)"), std::string::npos)
      << again.output;
  EXPECT_NE(Slurp(dir / "cache/cache.json").find("\"label_values\":[0,1,2,4]"), std::string::npos);

  // Cut short, then one byte flipped in place, then an input touched.
  fs::resize_file(dir / "cache/case00/image.npy", 1000);
  const CommandResult cut = Up(run);
  EXPECT_NE(cut.output.find("(0 written, 1 rebuilt, 1 up to date)"), std::string::npos)
      << cut.output;
  EXPECT_NE(cut.output.find("case case00 rebuilt: cache file '" + dir / "cache/case00/image.npy" +
                            "' is 1000 bytes"),
            std::string::npos)
      << cut.output;
  {
    std::fstream f(dir / "cache/case01/labels.npy",
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    f.put('\x07');
  }
  const CommandResult flipped = Up(run);
  EXPECT_NE(flipped.output.find("labels.npy' does not match its SHA-256"), std::string::npos)
      << flipped.output;
  fs::last_write_time(
      dir / "data/brats/case00/case00_t2.nii.gz",
      fs::last_write_time(dir / "data/brats/case00/case00_t2.nii.gz") + std::chrono::seconds(5));
  const CommandResult touched = Up(run);
  EXPECT_NE(touched.output.find("case case00 rebuilt: its inputs changed"), std::string::npos)
      << touched.output;
  EXPECT_EQ(Up(run).output.find("rebuilt:"), std::string::npos);

  // A cache case cut short under training: named, before any stage starts.
  fs::resize_file(dir / "cache/case01/labels.npy", 1000);
  const CommandResult train = Up({"train", "--config", SourcePath("configs/tiny3d.yaml"), "--set",
                                  "data.kind=cache", "--set", "data.path=" + dir / "cache", "--set",
                                  "model.num_classes=4", "--out", dir / "run"});
  EXPECT_EQ(train.exit_code, 2) << train.output;
  EXPECT_EQ(ErrorLines(train.output).size(), 1u) << train.output;
  EXPECT_NE(train.output.find("case01/labels.npy' is 1000 bytes"), std::string::npos)
      << train.output;
}

TEST(Preprocess, BadRawDataIsOneLineNamingTheCaseAndFile) {
  struct Case {
    const char* what;
    std::function<void(const std::string&)> spoil;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"missing channel",
       [](const std::string& raw) { fs::remove(raw + "/imagesTr/case_1_0001.nii.gz"); },
       "case 'case_1' has no channel 1 (ADC) image"},
      {"label outside the declared ones",
       [](const std::string& raw) {
         Volume seg = ReadNifti(raw + "/labelsTr/case_0.nii.gz");
         seg.voxels[seg.voxels.size() / 2] = 5;
         WriteNifti(raw + "/labelsTr/case_0.nii.gz", seg, NiftiStorage::kUInt8);
       },
       "labelsTr/case_0.nii.gz' (case case_0) holds label 5; the dataset's labels are 0, 1, 2"},
      {"NaN in an image",
       [](const std::string& raw) {
         Volume v = ReadNifti(raw + "/imagesTr/case_1_0000.nii.gz");
         v.voxels[100] = std::numeric_limits<float>::quiet_NaN();
         WriteNifti(raw + "/imagesTr/case_1_0000.nii.gz", v, NiftiStorage::kFloat32);
       },
       "imagesTr/case_1_0000.nii.gz' holds a NaN or infinite voxel (at x=0, y=5, z=0)"},
      {"channels of different sizes",
       [](const std::string& raw) {
         Volume v;
         v.dims = {4, 4, 4};
         v.voxels.assign(64, 1);
         WriteNifti(raw + "/imagesTr/case_0_0001.nii.gz", v, NiftiStorage::kFloat32);
       },
       "imagesTr/case_0_0001.nii.gz' is 4x4x4 but"},
      {"region-based labels",
       [](const std::string& raw) {
         std::ofstream(raw + "/dataset.json")
             << R"({"channel_names": {"0": "T2", "1": "ADC"}, "labels": {"background": 0, )"
             << R"("whole": [1, 2]}})";
       },
       "\"labels\" entry 'whole' is not one integer (region-based labels are not supported)"},
  };
  for (const Case& c : cases) {
    TempDir dir;
    WriteNnunetRaw(dir / "raw", 2);
    c.spoil(dir / "raw");
    const CommandResult r = Up({"preprocess", "--input", dir / "raw", "--out", dir / "cache"});
    EXPECT_EQ(r.exit_code, 2) << c.what << ": " << r.output;
    EXPECT_EQ(ErrorLines(r.output).size(), 1u) << c.what << ": " << r.output;
    EXPECT_NE(r.output.find(c.expected), std::string::npos) << c.what << ": " << r.output;
  }
}

}  // namespace
}  // namespace up::test
