// BraTS-layout NIfTI data: channels in modality order, z-scored, labels
// 0/1/2/4 mapped to classes 0..3, whole cases cut into patches of data.size, and one
// clear error per kind of bad case.
#include "common/data/nifti_dataset.h"

#include <gtest/gtest.h>

#include <stdlib.h>
#include <cmath>

#include <filesystem>
#include <fstream>

#include "common/base/errors.h"
#include "common/data/case_cache.h"
#include "common/data/raw_dataset.h"
#include "common/formats/nifti_io.h"

namespace up {
namespace {

namespace fs = std::filesystem;

class NiftiData : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/up-brats-XXXXXX";
    root_ = mkdtemp(tmpl);
    config_.model.dims = 3;
    config_.model.in_channels = 4;
    config_.model.num_classes = 4;
    config_.model.features = {8, 16};
    config_.data.kind = DataKind::kNifti;
    config_.data.path = root_.string();
    config_.data.size = {8, 8, 8};
  }
  void TearDown() override { fs::remove_all(root_); }

  // A case of n^3 voxels: modality m holds (m+1)*100 + x inside the brain
  // (x >= 1), 0 outside; seg holds `label` at voxel (x=1..2, y=0, z=0).
  void WriteCase(const std::string& name, int n, int label = 4,
                 const std::vector<std::string>& skip = {}) {
    const fs::path dir = root_ / name;
    fs::create_directories(dir);
    const char* modalities[4] = {"flair", "t1", "t1ce", "t2"};
    for (int m = 0; m < 4; ++m) {
      if (std::find(skip.begin(), skip.end(), modalities[m]) != skip.end()) continue;
      Volume v;
      v.dims = {n, n, n};
      for (int z = 0; z < n; ++z)
        for (int y = 0; y < n; ++y)
          for (int x = 0; x < n; ++x) v.voxels.push_back(x == 0 ? 0.f : (m + 1) * 100.f + x);
      WriteNifti((dir / (name + "_" + modalities[m] + ".nii.gz")).string(), v,
                 NiftiStorage::kInt16);
    }
    if (std::find(skip.begin(), skip.end(), "seg") != skip.end()) return;
    Volume seg;
    seg.dims = {n, n, n};
    seg.voxels.assign(static_cast<size_t>(n) * n * n, 0.f);
    seg.voxels[1] = static_cast<float>(label);
    seg.voxels[2] = 2.f;
    WriteNifti((dir / (name + "_seg.nii.gz")).string(), seg, NiftiStorage::kUInt8);
  }

  std::string ErrorOf(const std::function<void()>& f) {
    try {
      f();
    } catch (const UsageError& e) {
      return e.what();
    }
    return "(no error)";
  }

  fs::path root_;
  Config config_;
};

TEST_F(NiftiData, ReadsCasesWithMappedLabelsAndNormalisedChannels) {
  WriteCase("b", 8);
  WriteCase("a", 8);
  auto data = MakeDataset(config_);
  ASSERT_EQ(data->size(), 2);
  const Sample s = data->Get(0);
  EXPECT_EQ(s.image.sizes().vec(), (std::vector<int64_t>{4, 8, 8, 8}));
  EXPECT_EQ(s.mask.sizes().vec(), (std::vector<int64_t>{8, 8, 8}));
  EXPECT_EQ(s.mask[0][0][1].item<int64_t>(), 3);  // label 4 -> class 3
  EXPECT_EQ(s.mask[0][0][2].item<int64_t>(), 2);
  EXPECT_EQ(s.mask.max().item<int64_t>(), 3);
  for (int c = 0; c < 4; ++c) {
    const torch::Tensor brain = s.image[c].narrow(2, 1, 7);  // x >= 1: the "brain"
    EXPECT_NEAR(brain.mean().item<double>(), 0.0, 1e-4) << "channel " << c;
    EXPECT_NEAR(brain.std(/*unbiased=*/false).item<double>(), 1.0, 1e-5) << "channel " << c;
    EXPECT_EQ(s.image[c][0][0][0].item<float>(), 0.f);  // outside stays 0
  }
  // Intensity grows with x in every channel, as written.
  EXPECT_LT(s.image[2][3][3][2].item<float>(), s.image[2][3][3][5].item<float>());
}

// nnU-Net's mask and z-score: the voxels non-zero in any channel, holes
// they enclose filled, background that reaches the border left out; each
// channel over the whole mask (its own zeros inside it included), by the
// population standard deviation.
TEST(ZScoreNonzero, OverTheFilledUnionOfTheChannelsAsNnunet) {
  torch::Tensor image = torch::zeros({2, 5, 6, 6});                   // (C, D, H, W)
  image[0].narrow(0, 1, 3).narrow(1, 1, 4).narrow(2, 1, 4).fill_(5);  // a 3x4x4 block
  image[0][2][2][2] = 0;                                              // a hole inside it
  image[1][1][1][1] = 7;  // channel 1: one voxel inside the block
  image[1][4][5][5] = 3;  // and one alone in a corner
  const torch::Tensor mask = NonzeroMask(image);
  EXPECT_TRUE(mask[2][2][2].item<bool>()) << "the enclosed hole is filled";
  EXPECT_TRUE(mask[4][5][5].item<bool>()) << "any channel counts";
  EXPECT_FALSE(mask[0][0][0].item<bool>());
  EXPECT_FALSE(mask[4][4][4].item<bool>());
  EXPECT_EQ(mask.sum().item<int64_t>(), 3 * 4 * 4 + 1);
  const torch::Tensor z = ZScoreNonzero(image);
  for (int c = 0; c < 2; ++c) {
    const torch::Tensor v = z[c].masked_select(mask);
    EXPECT_NEAR(v.mean().item<double>(), 0.0, 1e-5) << c;
    EXPECT_NEAR(v.std(/*unbiased=*/false).item<double>(), 1.0, 1e-5) << c;
    EXPECT_EQ(z[c][0][0][0].item<float>(), 0.f) << "outside the mask stays 0";
  }
  // Channel 0 is 5 at 47 of the mask's 49 voxels and 0 at the hole and the
  // corner: mean 235/49, population variance 25*47/49 - mean^2.
  const double mean = 235.0 / 49, sd = std::sqrt(25.0 * 47 / 49 - mean * mean);
  EXPECT_NEAR(z[0][2][2][2].item<float>(), -mean / sd, 1e-4);
  EXPECT_NEAR(z[0][1][1][1].item<float>(), (5 - mean) / sd, 1e-4);
  // A case without a non-zero voxel stays as it is.
  EXPECT_TRUE(torch::equal(ZScoreNonzero(torch::zeros({1, 2, 2, 2})), torch::zeros({1, 2, 2, 2})));
}

TEST_F(NiftiData, GetsWholeCasesAndTrainsOnPatchesOfDataSize) {
  WriteCase("big", 12);
  config_.data.size = {8, 4, 16};
  config_.train.batch_size = 2;
  config_.train.micro_batches = 1;
  const auto data = MakeDataset(config_);
  EXPECT_TRUE(data->WholeCases());
  const Sample s = data->Get(0);
  EXPECT_EQ(s.image.sizes().vec(), (std::vector<int64_t>{4, 12, 12, 12}));
  const MicroBatch mb = LoadMicroBatch(*data, config_, 0, 0);
  EXPECT_EQ(mb.images.sizes().vec(), (std::vector<int64_t>{2, 4, 8, 4, 16}));
  EXPECT_EQ(mb.masks.sizes().vec(), (std::vector<int64_t>{2, 8, 4, 16}));
  // x: 12 -> 16 pads 2 on each side: the first two columns are padding (0).
  EXPECT_EQ(mb.images[0][0].select(2, 0).abs().max().item<float>(), 0.f);
  EXPECT_EQ(mb.images[0][0].select(2, 1).abs().max().item<float>(), 0.f);
}

// The encoder reads only images and the decoder only labels from a cache;
// the class locations place every foreground patch the same for both.
TEST_F(NiftiData, CacheReadsOnlyThePartEachProcessNeedsAndCutsTheSamePatch) {
  WriteCase("a", 12);
  WriteCase("b", 10);
  const RawDataset raw = ListRawDataset(root_.string());
  const std::string cache = (root_ / "cache").string();
  fs::create_directories(cache);
  std::string why;
  for (const RawCase& c : raw.cases)
    EXPECT_EQ(PreprocessCase(raw, c, cache, &why), CacheOutcome::kWritten);
  WriteCacheIndex(raw, cache);
  config_.data.kind = DataKind::kCache;
  config_.data.path = cache;
  config_.data.foreground_fraction = 1.0;
  // Every augmentation but scale (its nearest resampling may drop this
  // case's two-voxel foreground, which the last check looks for).
  config_.data.augment = {"rot90", "mirror", "noise", "brightness", "contrast", "gamma"};
  config_.train.batch_size = 4;
  config_.train.micro_batches = 2;
  const auto data = MakeDataset(config_);
  ASSERT_EQ(data->size(), 2);
  const Sample images = data->GetParts(0, SampleParts::kImages);
  EXPECT_TRUE(images.image.defined());
  EXPECT_FALSE(images.mask.defined());
  EXPECT_FALSE(images.class_locations.empty());
  EXPECT_FALSE(data->GetParts(0, SampleParts::kMasks).image.defined());
  for (int64_t step = 0; step < 3; ++step) {
    for (int mb = 0; mb < 2; ++mb) {
      const MicroBatch both = LoadMicroBatch(*data, config_, step, mb);
      const MicroBatch enc = LoadMicroBatch(*data, config_, step, mb, SampleParts::kImages);
      const MicroBatch dec = LoadMicroBatch(*data, config_, step, mb, SampleParts::kMasks);
      EXPECT_FALSE(enc.masks.defined());
      EXPECT_FALSE(dec.images.defined());
      EXPECT_TRUE(torch::equal(both.images, enc.images)) << step << " " << mb;
      EXPECT_TRUE(torch::equal(both.masks, dec.masks)) << step << " " << mb;
      // Every patch centred on foreground holds some.
      for (int64_t j = 0; j < both.masks.size(0); ++j)
        EXPECT_GT((both.masks[j] > 0).sum().item<int64_t>(), 0) << step << " " << mb << " " << j;
    }
  }
}

TEST_F(NiftiData, LabelMapping) {
  EXPECT_EQ(BratsLabelToClass(4), 3);
  EXPECT_EQ(BratsLabelToClass(3), -1);
  for (int c = 0; c < 4; ++c) EXPECT_EQ(BratsLabelToClass(BratsClassToLabel(c)), c);
}

TEST_F(NiftiData, MissingModalityIsNamed) {
  WriteCase("a", 8, 4, {"t1ce"});
  const std::string e = ErrorOf([&] { MakeDataset(config_); });
  EXPECT_NE(e.find("a_t1ce.nii.gz"), std::string::npos) << e;
}

TEST_F(NiftiData, UnknownLabelIsNamed) {
  WriteCase("a", 8, 3);
  auto data = MakeDataset(config_);
  const std::string e = ErrorOf([&] { data->Get(0); });
  EXPECT_NE(e.find("label 3"), std::string::npos) << e;
  EXPECT_NE(e.find("a_seg.nii.gz"), std::string::npos) << e;
}

TEST_F(NiftiData, MismatchedSizesAreNamed) {
  WriteCase("a", 8);
  Volume small;
  small.dims = {4, 4, 4};
  small.voxels.assign(64, 1.f);
  WriteNifti((root_ / "a" / "a_t2.nii.gz").string(), small, NiftiStorage::kInt16);
  const std::string e = ErrorOf([&] { MakeDataset(config_)->Get(0); });
  EXPECT_NE(e.find("a_t2.nii.gz"), std::string::npos) << e;
  EXPECT_NE(e.find("one size"), std::string::npos) << e;
}

TEST_F(NiftiData, CorruptFileIsNamed) {
  WriteCase("a", 8);
  std::ofstream(root_ / "a" / "a_flair.nii.gz") << "not nifti";
  const std::string e = ErrorOf([&] { MakeDataset(config_)->Get(0); });
  EXPECT_NE(e.find("a_flair.nii.gz"), std::string::npos) << e;
}

TEST_F(NiftiData, EmptyRootAndWrongModelAreClear) {
  EXPECT_NE(ErrorOf([&] { MakeDataset(config_); }).find("no case folders"), std::string::npos);
  WriteCase("a", 8);
  config_.model.num_classes = 3;
  EXPECT_NE(ErrorOf([&] { MakeDataset(config_); }).find("num_classes"), std::string::npos);
}

}  // namespace
}  // namespace up
