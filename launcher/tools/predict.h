// `unet-pipeline predict --checkpoint DIR --input PATH --out DIR [--device D]
//  [--overlap F] [--mirror] [--sw-batch-size N] [--blend gaussian|constant]
//  [--save-logits]`:
// runs a trained split U-Net (encoder half, then decoder half, in this
// process) on one input or a folder of them and writes, per input:
//
//   2-D (PNG in): NAME_mask.png     8-bit class indices, the training masks' format
//                 NAME_overlay.png  RGB: the input with each class in its colour
//   3-D (BraTS case folder in):
//                 CASE_seg.nii.gz   the whole volume, BraTS labels 0, 1, 2, 4
//                 CASE_mask.png, CASE_overlay.png   the middle axial slice (flair)
//
//   with --save-logits: NAME_logits.pt  {"logits": (K, *S), "input": (C, *S)}
//
// Inputs are preprocessed as in training (PNG / 255; each modality z-scored);
// a window of the training patch (data.size) slides over the whole input with
// Gaussian blending (common/model/sliding_window.h), so any size works: an
// input smaller than the patch is zero-padded to it and cropped back. The
// segmentation keeps the input's voxel grid and its NIfTI qform and sform.
#pragma once

#include <string>
#include <vector>

namespace up {

// The inputs `path` names for images of `dims`: a .png file or a folder of
// them (or a dataset root holding images/) for 2-D; a BraTS case folder or a
// folder of cases for 3-D (a 2-D network trained on volumes predicts them
// slice by slice). Sorted. UsageError when there are none.
std::vector<std::string> ListPredictInputs(const std::string& path, int dims);

int PredictCommand(int argc, char** argv);

}  // namespace up
