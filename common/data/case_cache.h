// The preprocessed cache: what `unet-pipeline preprocess` writes from a raw
// dataset (raw_dataset.h) and `data.kind: cache` trains from.
//
//   CACHE/cache.json          the dataset: layout, channel and class names,
//                             label values, cases
//   CACHE/<case>/image.npy    (C, D, H, W) float32: cropped to the box of
//                             voxels non-zero in any channel, each channel
//                             z-scored over its non-zero voxels
//   CACHE/<case>/labels.npy   (D, H, W) uint8 classes
//   CACHE/<case>/case.json    written last: the shapes, where the crop lies
//                             in the original volume, spacing, qform and
//                             sform (to put a prediction back), a stamp of
//                             the inputs (path, size, mtime), each array's
//                             SHA-256, and up to 10,000 voxel positions per
//                             foreground class (for oversampling without
//                             reading the labels)
//
// Every file is written atomically; a case is complete when its case.json
// names arrays that verify. Plain .npy, so numpy.load(..., mmap_mode="r")
// reads a case as well.
#pragma once

#include <torch/torch.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "common/data/dataset.h"
#include "common/data/raw_dataset.h"
#include "common/formats/nifti_io.h"

namespace up {

struct CacheCaseMeta {
  std::string name;
  int64_t channels = 0;
  std::vector<int64_t> shape;           // (D, H, W) as cached
  std::vector<int64_t> original_shape;  // (D, H, W) of the input volumes
  std::vector<int64_t> crop_begin;      // where the cached box starts in them
  std::array<double, 3> spacing{1, 1, 1};
  NiftiSpace space;
  std::string source_stamp;  // hex; changes when any input file does
  std::string image_sha256, labels_sha256;
  std::vector<std::vector<int64_t>> class_locations;  // [k]: flat voxel indices of class k (k >= 1)
};

enum class CacheOutcome { kWritten, kUpToDate, kRebuilt };

// Brings CACHE/<case>/ up to date with `c`: nothing when its case.json
// matches the inputs' stamp and its arrays verify; otherwise (re)written,
// with `*why` saying what was wrong with the old one. UsageError naming the
// case and file for bad input (raw_dataset.h, LoadRawCase).
CacheOutcome PreprocessCase(const RawDataset& dataset, const RawCase& c, const std::string& cache,
                            std::string* why);

// A cache entry's source stamp: hex SHA-256 over `header` and each file's
// path, size and modification time, so it changes when any of them does.
// UsageError naming a file that cannot be stat'ed.
std::string FilesStamp(const std::string& header, const std::vector<std::string>& files);

// CACHE/cache.json for `dataset` (atomically).
void WriteCacheIndex(const RawDataset& dataset, const std::string& cache);

// A case's metadata; UsageError naming the file when it is missing or bad.
CacheCaseMeta ReadCaseMeta(const std::string& case_dir);

// Whether the case's arrays are whole and match its metadata (sizes, shapes
// and SHA-256); "" when they do, else what is wrong, naming the file.
std::string VerifyCachedCase(const std::string& case_dir, const CacheCaseMeta& meta);

// CACHE/cache.json's label values (class k has label [k]) and case names.
struct CacheIndex {
  std::vector<int64_t> label_values;
  std::vector<std::string> cases;
};
CacheIndex ReadCacheIndex(const std::string& cache);

// A .npy array as a tensor of its shape (float32 or uint8), owning its bytes.
torch::Tensor ReadNpyTensor(const std::string& path);

// The box of voxels non-zero in any channel of `image` (C, D, H, W): its
// start and size per spatial axis; the whole volume when every voxel is 0.
void NonzeroBox(const torch::Tensor& image, std::vector<int64_t>* begin,
                std::vector<int64_t>* size);

// A view of `t` (..., *S) narrowed to the box at `begin` of `size` on its
// last size.size() axes.
torch::Tensor BoxView(const torch::Tensor& t, const std::vector<int64_t>& begin,
                      const std::vector<int64_t>& size);

// `data.kind: cache`: the cases cache.json lists. The constructor reads
// every case.json and checks it fits the model (channels, classes) and that
// each array has the size its header and metadata give; Get reads a whole
// case (and its class locations, which place foreground patches).
class CacheDataset : public Dataset {
 public:
  CacheDataset(const ModelConfig& model, const DataConfig& data);
  int64_t size() const override { return static_cast<int64_t>(cases_.size()); }
  Sample Get(int64_t index) const override;
  // The image alone, or the labels alone, each with the class locations that
  // place a foreground patch the same in every process.
  Sample GetParts(int64_t index, SampleParts parts) const override;
  bool WholeCases() const override { return true; }
  std::string CaseName(int64_t index) const override { return cases_.at(index).name; }
  std::vector<int64_t> SpatialShape(int64_t index) const override { return cases_.at(index).shape; }
  std::vector<int64_t> LabelValues() const override { return label_values_; }

 private:
  std::string root_;
  std::vector<int64_t> label_values_;
  std::vector<CacheCaseMeta> cases_;
};

}  // namespace up
