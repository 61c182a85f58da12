// See nifti_dataset.h.
#include "common/data/nifti_dataset.h"

#include <algorithm>
#include <filesystem>

#include "common/base/errors.h"
#include "common/formats/nifti_io.h"

namespace up {
namespace {

namespace fs = std::filesystem;

std::string FolderName(const std::string& case_dir) {
  return fs::path(case_dir).filename().string();
}

// (D, H, W) float32 viewing nothing: owns a copy of the volume.
torch::Tensor VolumeTensor(Volume&& v) {
  auto* owned = new std::vector<float>(std::move(v.voxels));
  return torch::from_blob(
      owned->data(), {v.dims[2], v.dims[1], v.dims[0]}, [owned](void*) { delete owned; },
      torch::kFloat32);
}

std::string SizeText(const torch::Tensor& t) {
  return std::to_string(t.size(-1)) + "x" + std::to_string(t.size(-2)) + "x" +
         std::to_string(t.size(-3));
}

}  // namespace

std::optional<std::string> BratsFile(const std::string& case_dir, const std::string& suffix) {
  const std::string stem = (fs::path(case_dir) / (FolderName(case_dir) + "_" + suffix)).string();
  std::error_code ec;
  for (const char* ext : {".nii.gz", ".nii"}) {
    if (fs::is_regular_file(stem + ext, ec)) return stem + ext;
  }
  return std::nullopt;
}

int64_t BratsLabelToClass(int64_t label) {
  switch (label) {
    case 0:
      return 0;
    case 1:
      return 1;
    case 2:
      return 2;
    case 4:
      return 3;
    default:
      return -1;
  }
}

int64_t BratsClassToLabel(int64_t cls) { return cls == 3 ? 4 : cls; }

torch::Tensor NonzeroMask(const torch::Tensor& image) {
  const torch::Tensor any = (image != 0).any(0).contiguous();  // (D, H, W)
  const int64_t D = any.size(0), H = any.size(1), W = any.size(2);
  // Background reachable from the border, by face-connected steps, is
  // outside; everything else (the voxels and the holes they enclose) inside.
  std::vector<uint8_t> outside(static_cast<size_t>(D * H * W), 0);
  const bool* in = any.data_ptr<bool>();
  std::vector<int64_t> queue;
  auto visit = [&](int64_t z, int64_t y, int64_t x) {
    if (z < 0 || y < 0 || x < 0 || z >= D || y >= H || x >= W) return;
    const int64_t i = (z * H + y) * W + x;
    if (in[i] || outside[static_cast<size_t>(i)]) return;
    outside[static_cast<size_t>(i)] = 1;
    queue.push_back(i);
  };
  for (int64_t z = 0; z < D; ++z)
    for (int64_t y = 0; y < H; ++y)
      for (int64_t x = 0; x < W; ++x)
        if (z == 0 || y == 0 || x == 0 || z == D - 1 || y == H - 1 || x == W - 1) visit(z, y, x);
  while (!queue.empty()) {
    const int64_t i = queue.back();
    queue.pop_back();
    const int64_t x = i % W, y = (i / W) % H, z = i / (W * H);
    visit(z - 1, y, x);
    visit(z + 1, y, x);
    visit(z, y - 1, x);
    visit(z, y + 1, x);
    visit(z, y, x - 1);
    visit(z, y, x + 1);
  }
  torch::Tensor mask = torch::empty({D, H, W}, torch::kBool);
  bool* out = mask.data_ptr<bool>();
  for (size_t i = 0; i < outside.size(); ++i) out[i] = outside[i] == 0;
  return mask;
}

torch::Tensor ZScoreNonzero(torch::Tensor image) {
  const torch::Tensor mask = NonzeroMask(image);      // (D, H, W)
  if (mask.sum().item<int64_t>() == 0) return image;  // an empty case stays 0
  std::vector<torch::Tensor> channels;
  for (int64_t c = 0; c < image.size(0); ++c) {
    const torch::Tensor x = image[c];  // (D, H, W)
    const torch::Tensor values = x.masked_select(mask);
    const torch::Tensor mean = values.mean();
    const torch::Tensor std = values.std(/*unbiased=*/false).clamp_min(1e-8);
    channels.push_back(torch::where(mask, (x - mean) / std, x));
  }
  return torch::stack(channels);  // (C, D, H, W)
}

BratsCase LoadRawCase(const RawCase& c, const std::vector<int64_t>& label_values,
                      bool with_labels) {
  BratsCase out;
  std::vector<torch::Tensor> channels;
  for (const std::string& path : c.images) {
    Volume v = ReadNifti(path);
    if (channels.empty()) {
      out.spacing = v.spacing;
      out.space = v.space;
    }
    torch::Tensor x = VolumeTensor(std::move(v));  // (D, H, W)
    if (!channels.empty() && x.sizes() != channels[0].sizes()) {
      throw UsageError("'" + path + "' is " + SizeText(x) + " but '" + c.images[0] + "' is " +
                       SizeText(channels[0]) + "; every volume of a case must have one size");
    }
    if (!torch::isfinite(x).all().item<bool>()) {
      throw UsageError("'" + path + "' (case " + c.name +
                       ") holds NaN or infinite voxels; fix or drop the case");
    }
    channels.push_back(std::move(x));
  }
  out.image = ZScoreNonzero(torch::stack(channels)).contiguous();  // (C, D, H, W)
  if (!with_labels) return out;

  torch::Tensor labels = VolumeTensor(ReadNifti(c.labels)).round().to(torch::kInt64);  // (D, H, W)
  if (labels.sizes().vec() != out.image.sizes().slice(1).vec()) {
    throw UsageError("'" + c.labels + "' is " + SizeText(labels) + " but the images are " +
                     SizeText(out.image) + "; the segmentation must match them");
  }
  torch::Tensor classes = torch::full_like(labels, -1);
  std::string declared;
  for (size_t k = 0; k < label_values.size(); ++k) {
    classes.masked_fill_(labels == label_values[k], static_cast<int64_t>(k));
    declared += (k ? ", " : "") + std::to_string(label_values[k]);
  }
  if ((classes < 0).any().item<bool>()) {
    const int64_t bad = labels.masked_select(classes < 0)[0].item<int64_t>();
    throw UsageError("'" + c.labels + "' (case " + c.name + ") holds label " + std::to_string(bad) +
                     "; the dataset's labels are " + declared);
  }
  out.labels = classes;
  return out;
}

BratsCase LoadBratsCase(const std::string& case_dir, bool with_labels) {
  RawCase c;
  c.name = FolderName(case_dir);
  for (const char* modality : kBratsModalities) {
    const std::optional<std::string> path = BratsFile(case_dir, modality);
    if (!path) {
      throw UsageError("case '" + case_dir + "' has no " + modality + " volume '" +
                       FolderName(case_dir) + "_" + modality +
                       ".nii.gz'; a BraTS case holds flair, t1, t1ce, t2 (and seg)");
    }
    c.images.push_back(*path);
  }
  if (with_labels) {
    const std::optional<std::string> seg = BratsFile(case_dir, "seg");
    if (!seg) {
      throw UsageError("case '" + case_dir + "' has no segmentation '" + FolderName(case_dir) +
                       "_seg.nii.gz'; training needs one per case");
    }
    c.labels = *seg;
  }
  return LoadRawCase(c, kBratsLabels, with_labels);
}

NiftiDataset::NiftiDataset(const ModelConfig& model, const DataConfig& data) {
  if (model.in_channels != 4 || MaskClasses(model) != 4) {
    throw UsageError(
        "data.kind = nifti needs model.in_channels = 4 and the 4 classes of BraTS "
        "(model.num_classes = 4, or model.regions over classes 0..3); set them with --set");
  }
  std::error_code ec;
  if (!fs::is_directory(data.path, ec)) {
    throw UsageError("data.path = " + data.path +
                     ": not a folder; expected one folder per case (BraTS layout)");
  }
  for (const auto& entry : fs::directory_iterator(data.path)) {
    if (entry.is_directory()) cases_.push_back(entry.path().string());
  }
  std::sort(cases_.begin(), cases_.end());
  if (cases_.empty()) {
    throw UsageError("data.path = " + data.path +
                     ": no case folders; expected DIR/<case>/<case>_{flair,t1,t1ce,t2,seg}.nii.gz");
  }
  for (const std::string& c : cases_) {
    for (const char* suffix : {"flair", "t1", "t1ce", "t2", "seg"}) {
      if (!BratsFile(c, suffix)) {
        throw UsageError("data: case '" + c + "' has no '" + FolderName(c) + "_" + suffix +
                         ".nii.gz'; every case needs flair, t1, t1ce, t2 and seg");
      }
    }
  }
}

std::string NiftiDataset::CaseName(int64_t index) const {
  return fs::path(cases_.at(index)).filename().string();
}

std::vector<int64_t> NiftiDataset::SpatialShape(int64_t index) const {
  const std::array<int64_t, 3> d = ReadNiftiDims(*BratsFile(cases_.at(index), "seg"));
  return {d[2], d[1], d[0]};  // (D, H, W)
}

Sample NiftiDataset::Get(int64_t index) const {
  BratsCase c = LoadBratsCase(cases_.at(index), /*with_labels=*/true);
  return {std::move(c.image), std::move(c.labels), {}};  // (4, D, H, W), (D, H, W)
}

}  // namespace up
