// Training data: a deterministic synthetic segmentation set and a folder of
// 2-D image/mask PNG pairs, plus the fixed sample order both trainers share.
//
// Every process that needs a micro-batch (the encoder its images, the decoder
// its masks, the reference trainer both) computes it from (seed, step,
// micro-batch) alone, so no data crosses the process boundary and the
// pipeline sees exactly the batches of single-process training.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/config/config.h"
#include "common/formats/png_io.h"

namespace up {

struct Sample {
  torch::Tensor image;  // (C, *S) float32
  torch::Tensor mask;   // (*S) int64, values in [0, num_classes)
  // Whole cases may say where each foreground class lies: [k] holds flat
  // voxel indices of class k (k >= 1), so a patch is placed without the mask.
  std::vector<std::vector<int64_t>> class_locations;
};

// What a process needs of a sample: the encoder the image, the decoder the
// mask, the single-process trainer both.
enum class SampleParts { kBoth, kImages, kMasks };

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  virtual Sample Get(int64_t index) const = 0;  // 0 <= index < size()
  // Whether Get returns whole cases of their own size, from which training
  // cuts patches of data.size (patch_sampler.h); otherwise samples are
  // data.size already.
  virtual bool WholeCases() const { return false; }
  // Get, reading only `parts` where the dataset can (the other may come
  // back undefined); by default the whole sample.
  virtual Sample GetParts(int64_t index, SampleParts parts) const { return Get(index); }
  // The sample's name (a case folder, a file stem, "sample_0007"): what
  // data.validation lists.
  virtual std::string CaseName(int64_t index) const;
  // The sample's spatial size (*S), cheaply where the dataset can (a file
  // header, metadata); by default its mask's.
  virtual std::vector<int64_t> SpatialShape(int64_t index) const;
  // The label each class stands for (class k is label [k]), where the data
  // says so; empty otherwise. BraTS' {0, 1, 2, 4} turns on the regions of
  // the validation Dice.
  virtual std::vector<int64_t> LabelValues() const { return {}; }
};

// Shapes of several classes (disc/ball, square/cube, diamond) on noise; each
// class raises the channels by its own pattern, so a U-Net can learn it.
// Sample i depends only on (seed, i).
class SyntheticDataset : public Dataset {
 public:
  SyntheticDataset(const ModelConfig& model, const DataConfig& data, uint64_t seed);
  int64_t size() const override { return samples_; }
  Sample Get(int64_t index) const override;
  std::vector<int64_t> SpatialShape(int64_t index) const override;

 private:
  ModelConfig model_;
  std::vector<int> size_;
  int64_t samples_;
  uint64_t seed_;
};

// DIR/images/NAME.png with DIR/masks/NAME.png (8-bit class indices, grey or
// palette). Images have 1-4 channels, must match model.in_channels and
// data.size. Files are listed and checked up front (pairing, and every
// header: size, channels), so a bad file fails before training; pixels (and
// the classes in each mask) are read on Get.
class FolderDataset : public Dataset {
 public:
  FolderDataset(const ModelConfig& model, const DataConfig& data);
  int64_t size() const override { return static_cast<int64_t>(names_.size()); }
  Sample Get(int64_t index) const override;
  std::string CaseName(int64_t index) const override { return names_.at(index); }
  std::vector<int64_t> SpatialShape(int64_t index) const override;

 private:
  void CheckImage(const PngImage& img, const std::string& path) const;
  void CheckMask(const PngImage& mask, const std::string& path) const;

  ModelConfig model_;
  std::string root_;
  std::vector<int> size_;
  std::vector<std::string> names_;
};

// The training data by data.kind (synthetic, folder, nifti
// (nifti_dataset.h) or cache (case_cache.h)): with data.validation, the
// cases left for training (validation_split.h).
std::unique_ptr<Dataset> MakeDataset(const Config& config);

// All of data.kind's cases, validation ones included.
std::unique_ptr<Dataset> MakeWholeDataset(const Config& config);

// An 8-bit PNG as the network sees it: (C, H, W) float32 in [0, 1].
torch::Tensor ImageTensor(const PngImage& img);

// The micro-batch `micro_batch` of optimizer step `step`, counted over the
// whole batch (0 .. BatchMicroBatches - 1: replica r's m-th is
// r*micro_batches + m): samples step*B + micro_batch*n + j
// (j < n = MicroBatchSamples) of an endless stream
// that visits the dataset in a fresh seeded permutation each epoch; from
// whole cases, or with data.augment, each the patch its position draws.
struct MicroBatch {
  torch::Tensor images;  // (n, C, *S) float32
  torch::Tensor masks;   // (n, *S) int64
};
// With `parts`, only those are read where the dataset allows; the tensor of
// the other part is then undefined.
MicroBatch LoadMicroBatch(const Dataset& data, const Config& config, int64_t step, int micro_batch,
                          SampleParts parts = SampleParts::kBoth);

// Index of the `position`-th sample of the stream (exposed for tests).
int64_t SampleIndex(int64_t dataset_size, uint64_t seed, int64_t position);

}  // namespace up
