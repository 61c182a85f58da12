// Whole-image prediction with a network trained on patches: a window of the
// training patch slides over the image, each window's logits are weighted by
// an importance map (a Gaussian centred on the window, so window borders
// count less) and the overlaps are blended, as MONAI's
// `sliding_window_inference(..., mode="gaussian")` and nnU-Net do.
//
// The window positions, the importance map and the blend are MONAI's
// (monai 1.6: `_get_scan_interval`, `dense_patch_slices`,
// `compute_importance_map`), so the blended logits equal theirs for the same
// network and input (tests/integration/sliding_window_test.cpp). An image
// smaller than the window on an axis is zero-padded symmetrically to it and
// the padding cropped off again.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "common/config/config.h"
#include "common/layout/window_grid.h"

namespace up {

// A window of one axis fewer than the image (a 2-D network over a volume)
// slides slice by slice: one slice deep (window_grid.h's WindowFor), and the
// network sees and returns 2-D windows.
struct SlidingWindowOptions {
  std::vector<int64_t>
      window;            // spatial size of a window, an entry per axis (or per axis but the first)
  double overlap = 0.5;  // fraction of a window shared with its neighbour, [0, 1)
  int batch = 1;         // windows per network call (MONAI's sw_batch_size), >= 1
  bool gaussian = true;  // Gaussian importance (else every voxel weighs 1)
  double sigma_scale = 0.125;  // Gaussian sigma = sigma_scale * window, per axis
  bool mirror = false;         // test-time mirroring: the mean over every flip of the axes
};

// The importance of each voxel of a window: (*window) float32.
torch::Tensor ImportanceMap(const std::vector<int64_t>& window, bool gaussian, double sigma_scale,
                            const torch::Device& device);

// The windows over one image and their blend, a batch at a time: what
// SlidingWindowLogits runs, apart, so the windows can be cut in one process
// and blended in another (the encoder and decoder stages in validation).
// The options' batch and mirror are the caller's; this is the geometry.
class SlidingWindow {
 public:
  // For an image of `spatial` size (before padding). std::invalid_argument
  // on a window of another rank or an option out of range.
  SlidingWindow(std::vector<int64_t> spatial, const SlidingWindowOptions& options);

  int64_t size() const { return static_cast<int64_t>(starts_.size()); }  // windows
  // `image` (1, C, *S) zero-padded, half before and half after, on every
  // axis shorter than the window: (1, C, *P).
  torch::Tensor Pad(const torch::Tensor& image) const;
  // Windows [first, first + count) of a padded image: (count, C, *w) (*w
  // the options' window: 2-D slices of a volume under a 2-D window); with
  // `fill` > count, zero windows follow up to `fill` rows.
  torch::Tensor Windows(const torch::Tensor& padded, int64_t first, int64_t count,
                        int64_t fill = 0) const;
  // Adds the logits (n >= count, K, *w) of windows [first, first + count),
  // weighted by the importance map; rows past `count` are ignored.
  void Blend(int64_t first, int64_t count, const torch::Tensor& logits);
  // The blend so far, (1, K, *S) float32 on the logits' device, padding cropped.
  torch::Tensor Result() const;

 private:
  std::vector<int64_t> spatial_;  // the image's, before padding
  std::vector<int64_t> padded_;
  std::vector<int64_t> before_;   // padding before each axis
  SlidingWindowOptions options_;  // its window as many axes as the image
  bool slices_ = false;           // the window asked for lacks axis 0
  std::vector<std::vector<int64_t>> starts_;
  torch::Tensor weight_;  // (1, 1, *w)
  torch::Tensor sum_;     // (1, K, *P)
  torch::Tensor count_;   // (1, 1, *P)
};

// The validation pass's windows: data.size at validate.overlap, Gaussian
// importance, no mirroring, a micro-batch's worth of windows a call.
SlidingWindowOptions ValidationWindows(const Config& config);

// Maps a batch of windows (n, C, *window) on the network's device to their
// logits (n, K, *window).
using WindowNet = std::function<torch::Tensor(const torch::Tensor&)>;

// Blended logits (1, K, *S) float32 on `device` for `image` (1, C, *S) (any
// device). Throws std::invalid_argument on a window of another rank than
// the image's spatial axes, or an option out of range.
torch::Tensor SlidingWindowLogits(const WindowNet& net, const torch::Tensor& image,
                                  const SlidingWindowOptions& options, const torch::Device& device);

// How many windows SlidingWindowLogits runs for an image of `spatial` size.
int64_t WindowCount(const std::vector<int64_t>& spatial, const SlidingWindowOptions& options);

}  // namespace up
