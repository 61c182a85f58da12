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

namespace up {

struct SlidingWindowOptions {
  std::vector<int64_t> window;  // spatial size of a window, one entry per axis
  double overlap = 0.5;         // fraction of a window shared with its neighbour, [0, 1)
  int batch = 1;                // windows per network call (MONAI's sw_batch_size), >= 1
  bool gaussian = true;         // Gaussian importance (else every voxel weighs 1)
  double sigma_scale = 0.125;   // Gaussian sigma = sigma_scale * window, per axis
  bool mirror = false;          // test-time mirroring: the mean over every flip of the axes
};

// Start of each window along one axis of `size` voxels (size >= window):
// 0, step, 2*step, ... with step = floor(window * (1 - overlap)) (at least
// 1; the whole axis when size == window), the last one moved back so it
// ends at `size`.
std::vector<int64_t> WindowStarts(int64_t size, int64_t window, double overlap);

// The importance of each voxel of a window: (*window) float32.
torch::Tensor ImportanceMap(const std::vector<int64_t>& window, bool gaussian, double sigma_scale,
                            const torch::Device& device);

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
