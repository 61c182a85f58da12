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
#include "common/nifti_io.h"

namespace up {

// Channel order of a BraTS case.
constexpr std::array<const char*, 4> kBratsModalities{"flair", "t1", "t1ce", "t2"};

// One case at its own size.
struct BratsCase {
  torch::Tensor image;   // (4, D, H, W) float32, each channel z-scored over non-zero voxels
  torch::Tensor labels;  // (D, H, W) int64 classes 0..3; undefined when read without seg
  std::array<double, 3> spacing{1, 1, 1};  // dx, dy, dz of the flair file (mm)
  NiftiSpace space;                        // the flair file's qform and sform
};

// The path of `<case>_<suffix>.nii.gz` (or .nii) in `case_dir`; nullopt if
// neither exists.
std::optional<std::string> BratsFile(const std::string& case_dir, const std::string& suffix);

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

 private:
  std::vector<std::string> cases_;  // case folders, sorted
};

}  // namespace up
