// 3-D training data in the BraTS layout, read with the NIfTI library:
//
//   DIR/<case>/<case>_flair.nii.gz  _t1.nii.gz  _t1ce.nii.gz  _t2.nii.gz  _seg.nii.gz
//
// (.nii accepted as well). The four modalities become the channels in that
// order; each is z-scored over its non-zero (brain) voxels. Segmentation
// labels 0, 1, 2, 4 (background, necrotic core, oedema, enhancing tumour)
// become classes 0, 1, 2, 3; any other label is an error. Get returns the
// whole case; training cuts a random patch of data.size from it, with
// foreground oversampling and augmentation (patch_sampler.h).
//
// Cases are listed and every file's presence checked up front; voxels are
// read on Get. Like every Dataset, Get is const and safe to call from any
// thread that owns its result.
#pragma once

#include <torch/torch.h>

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "common/data/dataset.h"
#include "common/formats/nifti_io.h"

namespace up {

// Channel order of a BraTS case.
constexpr std::array<const char*, 4> kBratsModalities{"flair", "t1", "t1ce", "t2"};

// One case at its own size.
struct BratsCase {
  torch::Tensor
      image;  // (C, D, H, W) float32 (C = 4 for BraTS), each channel z-scored over non-zero voxels
  torch::Tensor labels;  // (D, H, W) int64 classes; undefined when read without labels
  std::array<double, 3> spacing{1, 1, 1};  // dx, dy, dz of the first image file (mm)
  NiftiSpace space;                        // the first image file's qform and sform
};

// The path of `<case>_<suffix>.nii.gz` (or .nii) in `case_dir`; nullopt if
// neither exists.
std::optional<std::string> BratsFile(const std::string& case_dir, const std::string& suffix);

// One case of a raw dataset: its image files (the channels, in order) and
// its segmentation.
struct RawCase {
  std::string name;
  std::vector<std::string> images;
  std::string labels;  // empty when there is none
};

// BraTS' labels, class k having label kBratsLabels[k].
inline const std::vector<int64_t> kBratsLabels{0, 1, 2, 4};

// Reads a case: its image volumes z-scored as nnU-Net does (ZScoreNonzero), the segmentation's
// labels mapped to classes (class k has label label_values[k]). UsageError naming the case and file
// for volumes of different sizes, NaN or infinite voxels, or a label not declared.
BratsCase LoadRawCase(const RawCase& c, const std::vector<int64_t>& label_values, bool with_labels);

// The voxels of `image` (C, D, H, W) that are non-zero in any channel, with
// the holes enclosed by them filled (face-connected background that does not
// reach the volume's border): nnU-Net's create_nonzero_mask. (D, H, W) bool.
torch::Tensor NonzeroMask(const torch::Tensor& image);

// `image` (C, D, H, W) z-scored as nnU-Net's ZScoreNormalization with
// use_mask_for_norm: each channel over NonzeroMask's voxels, by its mean and
// population standard deviation (at least 1e-8); the voxels outside the mask
// (zero in every channel) stay 0.
torch::Tensor ZScoreNonzero(torch::Tensor image);

// Reads a case folder; `with_labels` also reads and maps <case>_seg. All
// volumes of a case must have one size. UsageError naming the file otherwise.
BratsCase LoadBratsCase(const std::string& case_dir, bool with_labels);

// BraTS label (0, 1, 2, 4) <-> class (0..3).
int64_t BratsLabelToClass(int64_t label);  // -1 for any other label
int64_t BratsClassToLabel(int64_t cls);

class NiftiDataset : public Dataset {
 public:
  NiftiDataset(const ModelConfig& model, const DataConfig& data);
  int64_t size() const override { return static_cast<int64_t>(cases_.size()); }
  Sample Get(int64_t index) const override;  // the whole case
  bool WholeCases() const override { return true; }
  std::string CaseName(int64_t index) const override;
  std::vector<int64_t> SpatialShape(int64_t index) const override;  // from the seg header
  std::vector<int64_t> LabelValues() const override { return kBratsLabels; }

 private:
  std::vector<std::string> cases_;  // case folders, sorted
};

}  // namespace up
