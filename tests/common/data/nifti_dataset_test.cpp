// BraTS-layout NIfTI data: channels in modality order, z-scored, labels
// 0/1/2/4 mapped to classes 0..3, whole cases cut into patches of data.size, and one
// clear error per kind of bad case.
#include "common/data/nifti_dataset.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "common/data/case_cache.h"
#include "common/data/raw_dataset.h"
#include "common/errors.h"
#include "common/nifti_io.h"

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
    config_.data.kind = "nifti";
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
    EXPECT_NEAR(brain.std().item<double>(), 1.0, 1e-3) << "channel " << c;
    EXPECT_EQ(s.image[c][0][0][0].item<float>(), 0.f);  // outside stays 0
  }
  // Intensity grows with x in every channel, as written.
  EXPECT_LT(s.image[2][3][3][2].item<float>(), s.image[2][3][3][5].item<float>());
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
  config_.data.kind = "cache";
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
