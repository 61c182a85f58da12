// Datasets and sample order; see dataset.h.
#include "common/data/dataset.h"

#include <cstdio>

#include <algorithm>
#include <filesystem>

#include "common/base/errors.h"
#include "common/data/case_cache.h"
#include "common/data/counter_random.h"
#include "common/data/nifti_dataset.h"
#include "common/data/patch_sampler.h"
#include "common/data/validation_split.h"
#include "common/formats/png_io.h"

namespace up {
namespace {

namespace fs = std::filesystem;

std::vector<int64_t> Shape(int64_t lead, const std::vector<int>& size) {
  std::vector<int64_t> s;
  if (lead > 0) s.push_back(lead);
  for (int v : size) s.push_back(v);
  return s;
}

}  // namespace

int64_t SampleIndex(int64_t n, uint64_t seed, int64_t position) {
  // Fisher-Yates with a counter-based generator: permutation of epoch e is
  // fixed by (seed, e). Recomputed per call; datasets here are small.
  const int64_t epoch = position / n;
  const std::vector<int64_t> perm =
      SeededPermutation(n, seed ^ (0xD1B54A32D192ED03ULL * static_cast<uint64_t>(epoch + 1)));
  return perm[position % n];
}

SyntheticDataset::SyntheticDataset(const ModelConfig& model, const DataConfig& data, uint64_t seed)
    : model_(model), size_(data.size), samples_(data.samples), seed_(seed) {}

Sample SyntheticDataset::Get(int64_t index) const {
  uint64_t state =
      seed_ * 0x2545F4914F6CDD1DULL + static_cast<uint64_t>(index) * 0x9E3779B97F4A7C15ULL + 7;
  const int dims = static_cast<int>(size_.size());
  auto gen = at::make_generator<at::CPUGeneratorImpl>(SplitMix(state));
  torch::NoGradGuard no_grad;

  // Coordinates of every voxel, one (S...) tensor per axis.
  std::vector<torch::Tensor> axes;
  for (int v : size_) axes.push_back(torch::arange(v, torch::kFloat32));
  std::vector<torch::Tensor> grid = torch::meshgrid(axes, "ij");

  torch::Tensor mask = torch::zeros(Shape(0, size_), torch::kInt64);  // (*S)
  const int shapes = 1 + static_cast<int>(SplitMix(state) % 3);
  const int min_side = *std::min_element(size_.begin(), size_.end());
  for (int k = 0; k < shapes; ++k) {
    const int cls = 1 + static_cast<int>(SplitMix(state) % (MaskClasses(model_) - 1));
    const double radius = min_side * (0.1 + 0.15 * Uniform(state));
    torch::Tensor dist;  // (*S): distance from the centre in the class's norm
    for (int d = 0; d < dims; ++d) {
      const double centre = radius + Uniform(state) * (size_[d] - 2 * radius);
      torch::Tensor delta = (grid[d] - centre).abs();
      if (!dist.defined()) {
        dist = cls % 3 == 1 ? delta * delta : delta;
      } else if (cls % 3 == 1) {
        dist = dist + delta * delta;  // disc / ball (L2)
      } else if (cls % 3 == 2) {
        dist = torch::maximum(dist, delta);  // square / cube (Linf)
      } else {
        dist = dist + delta;  // diamond (L1)
      }
    }
    const double limit = cls % 3 == 1 ? radius * radius : radius;
    mask.masked_fill_(dist <= limit, cls);
  }

  // Each channel: noise plus a per-class level.
  torch::Tensor image = torch::randn(Shape(model_.in_channels, size_), gen) * 0.6;  // (C, *S)
  for (int c = 0; c < model_.in_channels; ++c) {
    torch::Tensor levels = torch::zeros({MaskClasses(model_)}, torch::kFloat32);
    for (int cls = 1; cls < MaskClasses(model_); ++cls) {
      levels[cls] = 0.6 + 0.5 * ((cls + c) % 3) - (c % 2 == 1 && cls % 2 == 0 ? 0.9 : 0.0);
    }
    image[c] += levels.index_select(0, mask.flatten()).view(mask.sizes());
  }
  return {image, mask, {}};
}

FolderDataset::FolderDataset(const ModelConfig& model, const DataConfig& data)
    : model_(model), root_(data.path), size_(data.size) {
  if (model.dims != 2) {
    throw UsageError("data.kind = folder: PNG folders hold 2-D images, but model.dims = " +
                     std::to_string(model.dims) + "; use model.dims=2 or data.kind=synthetic");
  }
  const fs::path images = fs::path(root_) / "images";
  const fs::path masks = fs::path(root_) / "masks";
  std::error_code ec;
  if (!fs::is_directory(images, ec) || !fs::is_directory(masks, ec)) {
    throw UsageError("data.path = " + root_ + ": expected folders '" + images.string() + "' and '" +
                     masks.string() + "' holding image/mask PNG pairs of the same names");
  }
  for (const auto& entry : fs::directory_iterator(images)) {
    if (entry.path().extension() != ".png") continue;
    const std::string name = entry.path().filename().string();
    if (!fs::exists(masks / name)) {
      throw UsageError("data: image '" + entry.path().string() + "' has no mask '" +
                       (masks / name).string() + "'; every image needs a mask of the same name");
    }
    names_.push_back(name);
  }
  std::sort(names_.begin(), names_.end());
  if (names_.empty())
    throw UsageError("data.path = " + root_ + ": no .png images in '" + images.string() + "'");
  // Every header up front (cheap): a bad file fails before training starts.
  for (const std::string& name : names_) {
    CheckImage(ReadPngHeader((images / name).string()), (images / name).string());
    CheckMask(ReadPngHeader((masks / name).string(), PngPalette::kIndices),
              (masks / name).string());
  }
}

void FolderDataset::CheckImage(const PngImage& img, const std::string& path) const {
  if (img.height != size_[0] || img.width != size_[1]) {
    throw UsageError("data: '" + path + "' is " + std::to_string(img.height) + "x" +
                     std::to_string(img.width) + " (HxW) but data.size is [" +
                     std::to_string(size_[0]) + ", " + std::to_string(size_[1]) +
                     "]; resize the images or set data.size");
  }
  if (img.channels != model_.in_channels) {
    throw UsageError("data: '" + path + "' has " + std::to_string(img.channels) +
                     " channels but model.in_channels = " + std::to_string(model_.in_channels) +
                     "; set model.in_channels or convert the image");
  }
}

void FolderDataset::CheckMask(const PngImage& msk, const std::string& path) const {
  if (msk.height != size_[0] || msk.width != size_[1] || msk.channels != 1) {
    throw UsageError("data: mask '" + path + "' is " + std::to_string(msk.height) + "x" +
                     std::to_string(msk.width) + " with " + std::to_string(msk.channels) +
                     " channels; a mask must be a 1-channel (grey or palette) PNG of the image's "
                     "size " +
                     std::to_string(size_[0]) + "x" + std::to_string(size_[1]));
  }
}

torch::Tensor ImageTensor(const PngImage& img) {
  return torch::from_blob(const_cast<uint8_t*>(img.pixels.data()),
                          {img.height, img.width, img.channels}, torch::kUInt8)
      .permute({2, 0, 1})
      .to(torch::kFloat32)
      .div_(255.0)
      .contiguous();  // (C, H, W) in [0, 1]
}

Sample FolderDataset::Get(int64_t index) const {
  const std::string image_path = (fs::path(root_) / "images" / names_.at(index)).string();
  const std::string mask_path = (fs::path(root_) / "masks" / names_.at(index)).string();
  const PngImage img = ReadPng(image_path);
  const PngImage msk = ReadPng(mask_path, PngPalette::kIndices);
  CheckImage(img, image_path);  // the file may have changed since the constructor
  CheckMask(msk, mask_path);
  torch::Tensor image = ImageTensor(img);  // (C, H, W)
  torch::Tensor mask = torch::from_blob(const_cast<uint8_t*>(msk.pixels.data()),
                                        {msk.height, msk.width}, torch::kUInt8)
                           .to(torch::kInt64);  // (H, W)
  const int64_t max_class = mask.max().item<int64_t>();
  if (max_class >= MaskClasses(model_)) {
    throw UsageError(
        "data: mask '" + mask_path + "' holds class " + std::to_string(max_class) +
        (model_.regions.empty()
             ? " but model.num_classes = " + std::to_string(model_.num_classes)
             : " but model.regions name classes up to " + std::to_string(MaskClasses(model_) - 1)) +
        "; masks hold class indices 0..num_classes-1");
  }
  return {image, mask, {}};
}

std::string Dataset::CaseName(int64_t index) const {
  char name[32];
  std::snprintf(name, sizeof(name), "sample_%04lld", static_cast<long long>(index));
  return name;
}

std::vector<int64_t> Dataset::SpatialShape(int64_t index) const {
  return GetParts(index, SampleParts::kMasks).mask.sizes().vec();
}

std::vector<int64_t> SyntheticDataset::SpatialShape(int64_t) const {
  return std::vector<int64_t>(size_.begin(), size_.end());
}

std::vector<int64_t> FolderDataset::SpatialShape(int64_t) const {
  return std::vector<int64_t>(size_.begin(), size_.end());
}

std::unique_ptr<Dataset> MakeDataset(const Config& config) {
  return TrainingCases(MakeWholeDataset(config), config);
}

std::unique_ptr<Dataset> MakeWholeDataset(const Config& config) {
  if (config.data.kind == DataKind::kFolder)
    return std::make_unique<FolderDataset>(config.model, config.data);
  if (config.data.kind == DataKind::kNifti)
    return std::make_unique<NiftiDataset>(config.model, config.data);
  if (config.data.kind == DataKind::kCache)
    return std::make_unique<CacheDataset>(config.model, config.data);
  if (config.data.kind == DataKind::kNnunet) {
    // nnU-Net's preprocessed arrays, converted once into data.cache
    // (common/nnunet/nnunet_import.h) and read from there as any cache.
    DataConfig cached = config.data;
    cached.path = config.data.cache;
    std::error_code ec;
    if (!std::filesystem::exists(std::filesystem::path(cached.path) / "cache.json", ec)) {
      throw UsageError("data.dataset = " + config.data.dataset +
                       ": its preprocessed cases are not converted yet (no " + cached.path +
                       "/cache.json); `unet-pipeline train` or `unet-pipeline batches` with this "
                       "config converts them first");
    }
    return std::make_unique<CacheDataset>(config.model, cached);
  }
  return std::make_unique<SyntheticDataset>(config.model, config.data, config.train.seed);
}

MicroBatch LoadMicroBatch(const Dataset& data, const Config& config, int64_t step, int micro_batch,
                          SampleParts parts) {
  const int64_t n = MicroBatchSamples(config);
  std::vector<torch::Tensor> images, masks;
  for (int64_t j = 0; j < n; ++j) {
    const int64_t position = step * config.train.batch_size + micro_batch * n + j;
    Sample s = data.GetParts(SampleIndex(data.size(), config.train.seed, position), parts);
    if (data.WholeCases() || !config.data.augment.empty())
      s = CutPatch(s, DrawPatch(config, position), config.data.size);
    if (parts != SampleParts::kMasks) images.push_back(s.image);
    if (parts != SampleParts::kImages) masks.push_back(s.mask);
  }
  MicroBatch b;
  if (!images.empty()) b.images = torch::stack(images);
  if (!masks.empty()) b.masks = torch::stack(masks);
  return b;
}

}  // namespace up
