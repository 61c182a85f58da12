// `unet-pipeline predict --checkpoint DIR --input PATH --out DIR [--device D]`:
// runs a trained split U-Net (encoder half, then decoder half, in this
// process) on one input or a folder of them and writes, per input:
//
//   2-D (PNG in): NAME_mask.png     8-bit class indices, the training masks' format
//                 NAME_overlay.png  RGB: the input with each class in its colour
//   3-D (BraTS case folder in):
//                 CASE_seg.nii.gz   the whole volume, BraTS labels 0, 1, 2, 4
//                 CASE_mask.png, CASE_overlay.png   the middle axial slice (flair)
//
// Inputs are preprocessed as in training (PNG / 255; each modality z-scored)
// and zero-padded to a multiple of 2^levels, the prediction cropped back, so
// any size works.
#pragma once

#include <string>
#include <vector>

namespace up {

// The inputs `path` names for a model of `dims`: a .png file or a folder of
// them (or a dataset root holding images/) for 2-D; a BraTS case folder or a
// folder of cases for 3-D. Sorted. UsageError when there are none.
std::vector<std::string> ListPredictInputs(const std::string& path, int dims);

int PredictCommand(int argc, char** argv);

}  // namespace up
