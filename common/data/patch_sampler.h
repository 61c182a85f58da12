// Training patches from whole cases: where each patch lies and how it is
// augmented, drawn from (seed, stream position) alone.
//
// Every process that needs a sample (the encoder its image, the decoder its
// mask, the single-process trainer both) draws the same PatchDraw for the
// same position and cuts the same patch, so random patches and augmentation
// keep the pipeline bit-identical to single-process training. All random
// numbers are drawn up front in one fixed order, whichever augmentations are
// on, so turning one on does not move another's draws.
//
// As nnU-Net samples: data.foreground_fraction of the patches are centred on
// a voxel of a foreground class present in the case (class and voxel
// uniform), the rest lie uniformly inside the case; a case smaller than the
// patch on an axis is centred in it and zero-padded. The augmentations and
// their probabilities follow nnU-Net's defaults (augment.h).
//
// A 2-D patch of a 3-D case (a 2-D network on volumes, nnU-Net's 2d
// configuration) is cut as nnU-Net's data loader cuts it: a patch one slice
// deep placed as above (a foreground draw picks the slice of the chosen
// voxel), that slice then cut and augmented as a 2-D case.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "common/config/config.h"
#include "common/data/dataset.h"

namespace up {

struct PatchDraw {
  bool foreground = false;      // centre the patch on a foreground voxel
  double class_u = 0;           // [0, 1): which present foreground class
  double voxel_u = 0;           // [0, 1): which voxel of that class
  std::vector<double> place_u;  // [0, 1) per axis: where a random patch lies
  double slice_u = 0;           // [0, 1): which slice a 2-D patch of a volume lies in

  // Spatial augmentation (identity values when off or not drawn).
  double scale = 1;  // the patch shows patch*scale voxels of the case
  // Rotation in radians, as nnU-Net's SpatialTransform: 3-D, about axes 0,
  // 1 and 2 (x, y, z; applied in that order, after the scale); 2-D, or a
  // 3-D patch nnU-Net treats as 2-D (`in_plane`), one angle in the plane of
  // the last two axes. Empty: none.
  std::vector<double> rotation;
  // A 3-D patch over 3x longer in-plane than along axis 0 (nnU-Net's
  // "dummy 2-D" augmentation): scale and rotation leave axis 0 alone, and
  // low resolution is simulated in-plane only.
  bool in_plane = false;
  int rot90 = 0;           // quarter turns in the plane of the last two axes
  std::vector<bool> flip;  // per axis

  // Intensity augmentation of the image (augment.h).
  double noise_sigma = 0;  // 0: none
  uint64_t noise_seed = 0;
  bool blur = false;  // each channel (p 0.5) blurred, sigma U(0.5, 1) per axis
  uint64_t blur_seed = 0;
  double brightness = 1;  // multiplier
  double contrast = 1;    // factor around each channel's mean
  bool lowres = false;    // each channel (p 0.5) at U(0.5, 1) of its resolution
  uint64_t lowres_seed = 0;
  double gamma_inverted = 1;  // exponent on each channel's range, upside down
  double gamma = 1;           // exponent on each channel's range
};

// The draw for the sample at `position` of the stream (dataset.h), for a
// patch of `config.data.size` with the augmentations of config.data.augment.
PatchDraw DrawPatch(const Config& config, int64_t position);

// Where the patch starts on each axis of the case (may be negative when the
// case is smaller than the patch): a foreground draw is centred on the chosen
// voxel of a class present in the case, from `whole.class_locations` when the
// case has them, else from `whole.mask` (*S) (a random place when the case
// has no foreground), and kept inside the case where the case allows.
std::vector<int64_t> PatchOrigin(const PatchDraw& draw, const Sample& whole,
                                 const std::vector<int>& patch);

// The patch of `whole` (image (C, *S') and mask (*S'); either may be
// undefined when a process needs only one, the mask only when the case has
// class locations) that `draw` describes: image (C, *patch) float32, mask
// (*patch) int64. *S' has as many axes as the patch, or one more (a 2-D
// patch of a volume).
Sample CutPatch(const Sample& whole, const PatchDraw& draw, const std::vector<int>& patch);

// The matrix mapping a patch voxel's offset from the patch centre to the
// case's (dims x dims, axis 0 first): the rotation (about axis 0, then 1,
// then 2; or in the plane of the last two axes) times the scale, as
// batchgeneratorsv2's create_affine_matrix_3d / _2d (Rz Ry Rx S).
std::vector<std::vector<double>> SpatialAffine(const PatchDraw& draw, size_t dims);

// `t` (..., *S) cut to `size` from `origin` on the last size.size() axes,
// zero wherever the region leaves `t`.
torch::Tensor CropWithPadding(const torch::Tensor& t, const std::vector<int64_t>& origin,
                              const std::vector<int64_t>& size);

}  // namespace up
