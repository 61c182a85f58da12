// `unet-pipeline make-sample-data DIR` (called by scripts/make-sample-data.sh):
// a small dataset a newcomer can train, watch and predict on at once.
//
//   DIR/images/sample-NNN.png   4-channel (RGBA) 64x64 images
//   DIR/masks/sample-NNN.png    their masks, 8-bit class indices 0..2
//   DIR/brats/caseNN/caseNN_{flair,t1,t1ce,t2,seg}.nii.gz   small BraTS-layout cases
//
// Each image holds a disc (class 1) and a square (class 2) on noise, each
// class raising the channels by its own pattern; each case holds a nested
// "tumour" (labels 2 around 1 around 4, as BraTS) in a brain-shaped ball.
// Deterministic: the same seed writes the same files. Torch-free.
#pragma once

#include <cstdint>
#include <string>

namespace up {

struct SampleDataOptions {
  int images = 48;      // 2-D image/mask pairs
  int image_size = 64;  // pixels per side
  int cases = 4;        // 3-D BraTS cases
  int case_size = 40;   // voxels per side (configs crop or pad to data.size)
  uint64_t seed = 1;
};

// Writes the dataset into `dir` (created; existing sample files replaced).
void WriteSampleData(const std::string& dir, const SampleDataOptions& options);

// The subcommand: parses argv (`make-sample-data DIR [--images N] [--cases N]
// [--seed S]`), writes, prints what it wrote.
int MakeSampleDataCommand(int argc, char** argv);

}  // namespace up
