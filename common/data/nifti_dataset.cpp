// See nifti_dataset.h.
#include "common/data/nifti_dataset.h"

#include <algorithm>
#include <filesystem>

#include "common/errors.h"
#include "common/nifti_io.h"

namespace up {
namespace {

namespace fs = std::filesystem;

std::string CaseName(const std::string& case_dir) { return fs::path(case_dir).filename().string(); }

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
  const std::string stem = (fs::path(case_dir) / (CaseName(case_dir) + "_" + suffix)).string();
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

BratsCase LoadBratsCase(const std::string& case_dir, bool with_labels) {
  BratsCase out;
  std::vector<torch::Tensor> channels;
  std::string first_path;
  for (const char* modality : kBratsModalities) {
    const std::optional<std::string> path = BratsFile(case_dir, modality);
    if (!path) {
      throw UsageError("case '" + case_dir + "' has no " + modality + " volume '" +
                       CaseName(case_dir) + "_" + modality +
                       ".nii.gz'; a BraTS case holds flair, t1, t1ce, t2 (and seg)");
    }
    Volume v = ReadNifti(*path);
    if (channels.empty()) {
      out.spacing = v.spacing;
      out.space = v.space;
      first_path = *path;
    }
    torch::Tensor x = VolumeTensor(std::move(v));  // (D, H, W)
    if (!channels.empty() && x.sizes() != channels[0].sizes()) {
      throw UsageError("'" + *path + "' is " + SizeText(x) + " but '" + first_path + "' is " +
                       SizeText(channels[0]) + "; every volume of a case must have one size");
    }
    // z-score over the brain (non-zero voxels); an empty channel stays 0.
    const torch::Tensor brain = x != 0;
    const int64_t n = brain.sum().item<int64_t>();
    if (n > 1) {
      const torch::Tensor values = x.masked_select(brain);
      x = torch::where(brain, (x - values.mean()) / (values.std() + 1e-6), torch::zeros_like(x));
    }
    channels.push_back(x);
  }
  out.image = torch::stack(channels).contiguous();  // (4, D, H, W)
  if (!with_labels) return out;

  const std::optional<std::string> seg = BratsFile(case_dir, "seg");
  if (!seg) {
    throw UsageError("case '" + case_dir + "' has no segmentation '" + CaseName(case_dir) +
                     "_seg.nii.gz'; training needs one per case");
  }
  torch::Tensor labels = VolumeTensor(ReadNifti(*seg)).round().to(torch::kInt64);  // (D, H, W)
  if (labels.sizes().vec() != out.image.sizes().slice(1).vec()) {
    throw UsageError("'" + *seg + "' is " + SizeText(labels) + " but the modalities are " +
                     SizeText(out.image) + "; the segmentation must match them");
  }
  torch::Tensor classes = torch::full_like(labels, -1);
  for (int64_t label : {0, 1, 2, 4})
    classes.masked_fill_(labels == label, BratsLabelToClass(label));
  if ((classes < 0).any().item<bool>()) {
    const int64_t bad = labels.masked_select(classes < 0)[0].item<int64_t>();
    throw UsageError("'" + *seg + "' holds label " + std::to_string(bad) +
                     "; BraTS segmentations hold 0, 1, 2 and 4 only");
  }
  out.labels = classes;
  return out;
}

NiftiDataset::NiftiDataset(const ModelConfig& model, const DataConfig& data) {
  if (model.dims != 3 || model.in_channels != 4 || model.num_classes != 4) {
    throw UsageError(
        "data.kind = nifti needs model.dims = 3, model.in_channels = 4 and "
        "model.num_classes = 4 (BraTS); set them with --set");
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
        throw UsageError("data: case '" + c + "' has no '" + CaseName(c) + "_" + suffix +
                         ".nii.gz'; every case needs flair, t1, t1ce, t2 and seg");
      }
    }
  }
}

Sample NiftiDataset::Get(int64_t index) const {
  BratsCase c = LoadBratsCase(cases_.at(index), /*with_labels=*/true);
  return {std::move(c.image), std::move(c.labels)};  // (4, D, H, W), (D, H, W)
}

}  // namespace up
