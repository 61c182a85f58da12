// Datasets: determinism (every process must see the same batches), value
// ranges, and clear errors for bad folder data.
#include "common/data/dataset.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "common/base/errors.h"
#include "common/formats/png_io.h"

namespace up {
namespace {

namespace fs = std::filesystem;

Config TinyConfig(int dims) {
  Config c;
  c.model.dims = dims;
  c.model.features = {8, 16};
  c.data.size = std::vector<int>(dims, 16);
  c.train.batch_size = 4;
  c.train.micro_batches = 2;
  c.train.seed = 3;
  return c;
}

TEST(SampleOrder, IsAPermutationPerEpochAndDeterministic) {
  for (uint64_t seed : {0ULL, 5ULL}) {
    std::set<int64_t> seen;
    for (int64_t p = 0; p < 10; ++p) {
      seen.insert(SampleIndex(10, seed, p));
      EXPECT_EQ(SampleIndex(10, seed, p), SampleIndex(10, seed, p));
    }
    EXPECT_EQ(seen.size(), 10u);
  }
  bool differs = false;
  for (int64_t p = 0; p < 10; ++p) differs |= SampleIndex(10, 1, p) != SampleIndex(10, 1, p + 10);
  EXPECT_TRUE(differs) << "each epoch should have its own order";
}

class SyntheticDims : public ::testing::TestWithParam<int> {};

TEST_P(SyntheticDims, SameSeedSameBatchesDifferentSeedDifferent) {
  Config c = TinyConfig(GetParam());
  auto a = MakeDataset(c);
  auto b = MakeDataset(c);
  MicroBatch x = LoadMicroBatch(*a, c, 3, 1);
  MicroBatch y = LoadMicroBatch(*b, c, 3, 1);
  EXPECT_TRUE(torch::equal(x.images, y.images));
  EXPECT_TRUE(torch::equal(x.masks, y.masks));
  std::vector<int64_t> image_shape{2, 4};
  for (int d = 0; d < GetParam(); ++d) image_shape.push_back(16);
  EXPECT_EQ(x.images.sizes().vec(), image_shape);
  EXPECT_EQ(x.masks.dtype(), torch::kInt64);

  c.train.seed = 4;
  auto other = MakeDataset(c);
  EXPECT_FALSE(torch::equal(LoadMicroBatch(*other, c, 3, 1).images, x.images));
  EXPECT_FALSE(torch::equal(LoadMicroBatch(*a, TinyConfig(GetParam()), 3, 0).images, x.images));
}

TEST_P(SyntheticDims, MasksHoldForegroundClassesInRange) {
  Config c = TinyConfig(GetParam());
  c.model.num_classes = 4;
  c.data.size = std::vector<int>(GetParam(), 32);
  auto data = MakeDataset(c);
  std::set<int64_t> classes;
  for (int i = 0; i < 20; ++i) {
    Sample s = data->Get(i);
    EXPECT_GE(s.mask.min().item<int64_t>(), 0);
    EXPECT_LT(s.mask.max().item<int64_t>(), 4);
    for (int64_t k = 1; k < 4; ++k) {
      if ((s.mask == k).any().item<bool>()) classes.insert(k);
    }
  }
  EXPECT_EQ(classes.size(), 3u) << "every foreground class should appear";
}

INSTANTIATE_TEST_SUITE_P(TwoAndThreeD, SyntheticDims, ::testing::Values(2, 3));

class FolderData : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/up-folder-XXXXXX";
    root_ = mkdtemp(tmpl);
    fs::create_directories(root_ / "images");
    fs::create_directories(root_ / "masks");
    config_ = TinyConfig(2);
    config_.model.in_channels = 3;
    config_.data.kind = DataKind::kFolder;
    config_.data.path = root_.string();
  }
  void TearDown() override { fs::remove_all(root_); }

  void Write(const std::string& sub, const std::string& name, int h, int w, int channels,
             uint8_t value) {
    PngImage img;
    img.height = h;
    img.width = w;
    img.channels = channels;
    img.pixels.assign(static_cast<size_t>(h) * w * channels, value);
    WritePng((root_ / sub / name).string(), img);
  }

  void ExpectError(const std::string& part) {
    try {
      MakeDataset(config_);
      FAIL() << "expected UsageError containing: " << part;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  }

  fs::path root_;
  Config config_;
};

TEST_F(FolderData, ReadsPairs) {
  Write("images", "a.png", 16, 16, 3, 255);
  Write("masks", "a.png", 16, 16, 1, 2);
  auto data = MakeDataset(config_);
  ASSERT_EQ(data->size(), 1);
  Sample s = data->Get(0);
  EXPECT_EQ(s.image.sizes().vec(), (std::vector<int64_t>{3, 16, 16}));
  EXPECT_FLOAT_EQ(s.image.max().item<float>(), 1.0f);
  EXPECT_EQ(s.mask.max().item<int64_t>(), 2);
}

TEST_F(FolderData, MissingMaskIsAClearError) {
  Write("images", "a.png", 16, 16, 3, 1);
  try {
    MakeDataset(config_);
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("has no mask"), std::string::npos) << e.what();
  }
}

// Each bad file fails when the dataset is made (before training), naming the
// file and what to do.
TEST_F(FolderData, WrongSizeIsAClearErrorUpFront) {
  Write("images", "a.png", 16, 8, 3, 1);
  Write("masks", "a.png", 16, 8, 1, 0);
  ExpectError("a.png' is 16x8 (HxW) but data.size is [16, 16]");
}

TEST_F(FolderData, WrongChannelsIsAClearErrorUpFront) {
  Write("images", "b.png", 16, 16, 1, 1);
  Write("masks", "b.png", 16, 16, 1, 0);
  ExpectError("has 1 channels but model.in_channels = 3");
}

TEST_F(FolderData, ColourMaskIsAClearErrorUpFront) {
  Write("images", "c.png", 16, 16, 3, 1);
  Write("masks", "c.png", 16, 16, 3, 0);
  ExpectError("a mask must be a 1-channel");
}

TEST_F(FolderData, CorruptFileIsAClearErrorUpFront) {
  Write("images", "d.png", 16, 16, 3, 1);
  std::ofstream(root_ / "masks" / "d.png") << "not a png";
  ExpectError("not a PNG");
}

TEST_F(FolderData, ClassOutOfRangeIsAClearErrorOnRead) {
  Write("images", "c.png", 16, 16, 3, 1);
  Write("masks", "c.png", 16, 16, 1, 9);
  auto data = MakeDataset(config_);
  try {
    data->Get(0);
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("holds class 9 but model.num_classes = 3"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(FolderData, EmptyFolderIsAClearError) { EXPECT_THROW(MakeDataset(config_), UsageError); }

}  // namespace
}  // namespace up
