// The raw datasets `unet-pipeline preprocess` reads, listed and checked:
//
//   BraTS:    DIR/<case>/<case>_{flair,t1,t1ce,t2,seg}.nii.gz (or .nii);
//             labels 0, 1, 2, 4 as classes 0..3
//   nnU-Net:  DIR/dataset.json ("channel_names", "labels", "file_ending"),
//             DIR/imagesTr/<case>_0000.nii.gz ... one file per channel,
//             DIR/labelsTr/<case>.nii.gz; labels 0..K-1 as declared
//
// Listing checks every file's presence and the dataset.json; it reads no
// voxels. Each failure is a UsageError naming the file and what to do.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/data/nifti_dataset.h"

namespace up {

struct RawDataset {
  std::string layout;                      // "brats" or "nnunet"
  std::vector<std::string> channel_names;  // one per image file of a case
  std::vector<std::string> class_names;    // class k's name
  std::vector<int64_t> label_values;       // class k's label in the files
  std::vector<RawCase> cases;              // sorted by name
};

RawDataset ListRawDataset(const std::string& dir);

}  // namespace up
