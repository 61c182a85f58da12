// Where the windows of a sliding-window prediction lie, and how a validation
// pass walks them: torch-free geometry shared by `predict`
// (common/model/sliding_window.h), the single-process trainer and the two
// stages, so every process cuts and blends the same windows in the same
// order.
//
// The window positions are MONAI's (monai 1.6 `_get_scan_interval`,
// `dense_patch_slices`): along each axis 0, step, 2*step, ... with
// step = floor(window * (1 - overlap)), the last start moved back so the
// window ends at the axis' end; windows enumerated with the last axis
// varying fastest. An axis shorter than the window is padded up to it first
// (PaddedSize).
#pragma once

#include <cstdint>
#include <vector>

namespace up {

// The window over an image of `spatial` size: `window` itself, or, for a
// 2-D window over a 3-D image (a 2-D network on volumes, as nnU-Net's 2d
// configuration), the window one slice deep, {1, h, w}, so the image is
// predicted slice by slice.
std::vector<int64_t> WindowFor(const std::vector<int64_t>& spatial,
                               const std::vector<int64_t>& window);

// Start of each window along one axis of `size` voxels (size >= window):
// 0, step, 2*step, ... with step = floor(window * (1 - overlap)) (at least
// 1; the whole axis when size == window), the last one moved back so it
// ends at `size`.
std::vector<int64_t> WindowStarts(int64_t size, int64_t window, double overlap);

// `spatial` with every axis shorter than the window raised to the window.
std::vector<int64_t> PaddedSize(const std::vector<int64_t>& spatial,
                                const std::vector<int64_t>& window);

// Every window's start over an image of `spatial` size (before padding),
// the last axis varying fastest (a window one axis short: WindowFor's).
std::vector<std::vector<int64_t>> WindowGrid(const std::vector<int64_t>& spatial,
                                             const std::vector<int64_t>& window, double overlap);

// One network call of a validation pass: windows [first, first + count) of
// case `case_index` (an index into the validation cases); `last` when it is
// the case's final batch, after which the case's prediction is complete.
struct ValidationBatch {
  int64_t case_index = 0;
  int64_t first = 0;
  int64_t count = 0;
  bool last = false;
  bool operator==(const ValidationBatch& o) const {
    return case_index == o.case_index && first == o.first && count == o.count && last == o.last;
  }
};

// The batches of a pass over cases of the given spatial shapes, cases in
// order, at most `batch` windows each (a batch never spans two cases).
std::vector<ValidationBatch> ValidationPlan(const std::vector<std::vector<int64_t>>& case_shapes,
                                            const std::vector<int64_t>& window, double overlap,
                                            int64_t batch);

}  // namespace up
