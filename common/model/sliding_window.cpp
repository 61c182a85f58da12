// See sliding_window.h.
#include "common/model/sliding_window.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace up {
namespace {

void Check(const torch::Tensor& image, const SlidingWindowOptions& o) {
  if (image.dim() < 3 || image.size(0) != 1) {
    throw std::invalid_argument("sliding window: expected one image (1, C, *S), got " +
                                std::to_string(image.dim()) + " axes");
  }
  if (static_cast<int64_t>(o.window.size()) != image.dim() - 2) {
    throw std::invalid_argument("sliding window: a window of " + std::to_string(o.window.size()) +
                                " axes for an image of " + std::to_string(image.dim() - 2));
  }
  for (int64_t w : o.window) {
    if (w < 1) throw std::invalid_argument("sliding window: window sizes must be >= 1");
  }
  if (!(o.overlap >= 0 && o.overlap < 1))
    throw std::invalid_argument("sliding window: overlap must be in [0, 1)");
  if (o.batch < 1) throw std::invalid_argument("sliding window: batch must be >= 1");
}

// The network's logits for windows (n, C, *w), averaged over every flip of
// the spatial axes when mirroring: (n, K, *w) float32.
torch::Tensor Predict(const WindowNet& net, const torch::Tensor& windows, bool mirror) {
  torch::Tensor sum = net(windows).to(torch::kFloat32);
  if (!mirror) return sum;
  const int64_t dims = windows.dim() - 2;
  const int64_t flips = int64_t{1} << dims;
  for (int64_t mask = 1; mask < flips; ++mask) {
    std::vector<int64_t> axes;
    for (int64_t a = 0; a < dims; ++a)
      if ((mask >> a) & 1) axes.push_back(2 + a);
    sum.add_(net(windows.flip(axes)).to(torch::kFloat32).flip(axes));
  }
  return sum.div_(static_cast<double>(flips));
}

// Every window's start, the last axis varying fastest (numpy's meshgrid
// "ij" order, as MONAI enumerates them).
std::vector<std::vector<int64_t>> AllStarts(const std::vector<int64_t>& spatial,
                                            const SlidingWindowOptions& o) {
  std::vector<std::vector<int64_t>> per_axis;
  for (size_t a = 0; a < spatial.size(); ++a)
    per_axis.push_back(WindowStarts(spatial[a], o.window[a], o.overlap));
  std::vector<std::vector<int64_t>> out{{}};
  for (const std::vector<int64_t>& starts : per_axis) {
    std::vector<std::vector<int64_t>> next;
    for (const std::vector<int64_t>& prefix : out) {
      for (int64_t s : starts) {
        next.push_back(prefix);
        next.back().push_back(s);
      }
    }
    out = std::move(next);
  }
  return out;
}

// `t` (N, C, *S) narrowed to the window at `start`.
torch::Tensor Window(const torch::Tensor& t, const std::vector<int64_t>& start,
                     const std::vector<int64_t>& window) {
  torch::Tensor w = t;
  for (size_t a = 0; a < start.size(); ++a)
    w = w.narrow(static_cast<int64_t>(a) + 2, start[a], window[a]);
  return w;
}

}  // namespace

std::vector<int64_t> WindowStarts(int64_t size, int64_t window, double overlap) {
  if (size <= window) return {0};
  const int64_t step =
      std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(window) * (1 - overlap)));
  std::vector<int64_t> starts;
  for (int64_t s = 0;; s += step) {
    if (s + window >= size) {
      starts.push_back(size - window);
      break;
    }
    starts.push_back(s);
  }
  return starts;
}

torch::Tensor ImportanceMap(const std::vector<int64_t>& window, bool gaussian, double sigma_scale,
                            const torch::Device& device) {
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(device);
  if (!gaussian) return torch::ones(window, f32);
  torch::Tensor map;
  for (size_t a = 0; a < window.size(); ++a) {
    const double half = static_cast<double>(window[a] - 1) / 2.0;
    const double sigma = static_cast<double>(window[a]) * sigma_scale;
    torch::Tensor x = torch::arange(-half, half + 1, f32);  // (w_a,)
    x = torch::exp(x.pow(2) / (-2 * sigma * sigma));
    if (a == 0) {
      map = x;
    } else {
      std::vector<int64_t> shape(a, 1);
      shape.push_back(window[a]);
      map = map.unsqueeze(-1) * x.view(shape);
    }
  }
  // No voxel weighs nothing: the smallest weight is at least 1e-3.
  const double floor = std::max(map.min().item<double>(), 1e-3);
  return map.clamp_min_(floor);
}

int64_t WindowCount(const std::vector<int64_t>& spatial, const SlidingWindowOptions& options) {
  int64_t n = 1;
  for (size_t a = 0; a < spatial.size(); ++a)
    n *= static_cast<int64_t>(
        WindowStarts(std::max(spatial[a], options.window.at(a)), options.window[a], options.overlap)
            .size());
  return n;
}

torch::Tensor SlidingWindowLogits(const WindowNet& net, const torch::Tensor& image,
                                  const SlidingWindowOptions& options,
                                  const torch::Device& device) {
  Check(image, options);
  const int64_t dims = image.dim() - 2;
  const std::vector<int64_t>& window = options.window;

  // Zero-pad each axis shorter than the window, half before and half after.
  std::vector<int64_t> pad;  // constant_pad_nd: the last axis first
  std::vector<int64_t> before(static_cast<size_t>(dims));
  bool padded = false;
  for (int64_t d = image.dim() - 1; d >= 2; --d) {
    const int64_t diff = std::max<int64_t>(window[d - 2] - image.size(d), 0);
    before[d - 2] = diff / 2;
    pad.push_back(diff / 2);
    pad.push_back(diff - diff / 2);
    padded = padded || diff > 0;
  }
  const torch::Tensor x = padded ? torch::constant_pad_nd(image, pad, 0) : image;  // (1, C, *P)
  const std::vector<int64_t> spatial(x.sizes().begin() + 2, x.sizes().end());

  std::vector<int64_t> weight_shape{1, 1};
  weight_shape.insert(weight_shape.end(), window.begin(), window.end());
  const torch::Tensor weight =
      ImportanceMap(window, options.gaussian, options.sigma_scale, device).view(weight_shape);
  std::vector<int64_t> count_shape{1, 1};
  count_shape.insert(count_shape.end(), spatial.begin(), spatial.end());
  const torch::Tensor count =
      torch::zeros(count_shape, torch::TensorOptions().dtype(torch::kFloat32).device(device));
  torch::Tensor sum;  // (1, K, *P), once K is known

  const std::vector<std::vector<int64_t>> starts = AllStarts(spatial, options);
  for (size_t first = 0; first < starts.size(); first += static_cast<size_t>(options.batch)) {
    const size_t last = std::min(starts.size(), first + static_cast<size_t>(options.batch));
    std::vector<torch::Tensor> windows;
    for (size_t i = first; i < last; ++i) windows.push_back(Window(x, starts[i], window));
    const torch::Tensor logits =
        Predict(net, torch::cat(windows).to(device), options.mirror);  // (n, K, *w)
    if (!sum.defined()) {
      std::vector<int64_t> shape{1, logits.size(1)};
      shape.insert(shape.end(), spatial.begin(), spatial.end());
      sum = torch::zeros(shape, logits.options());
    }
    for (size_t i = first; i < last; ++i) {
      const int64_t j = static_cast<int64_t>(i - first);
      Window(sum, starts[i], window).add_(logits.narrow(0, j, 1) * weight);
      Window(count, starts[i], window).add_(weight);
    }
  }
  sum.div_(count);
  torch::Tensor out = sum;
  for (int64_t a = 0; a < dims; ++a) out = out.narrow(a + 2, before[a], image.size(a + 2));
  return out.contiguous();
}

}  // namespace up
