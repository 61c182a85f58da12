// See sliding_window.h.
#include "common/model/sliding_window.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace up {
namespace {

void CheckOptions(size_t axes, const SlidingWindowOptions& o) {
  if (o.window.size() != axes && o.window.size() + 1 != axes) {
    throw std::invalid_argument("sliding window: a window of " + std::to_string(o.window.size()) +
                                " axes for an image of " + std::to_string(axes) +
                                " (the same, or one more: slice by slice)");
  }
  for (int64_t w : o.window) {
    if (w < 1) throw std::invalid_argument("sliding window: window sizes must be >= 1");
  }
  if (!(o.overlap >= 0 && o.overlap < 1))
    throw std::invalid_argument("sliding window: overlap must be in [0, 1)");
  if (o.batch < 1) throw std::invalid_argument("sliding window: batch must be >= 1");
}

void Check(const torch::Tensor& image, const SlidingWindowOptions& o) {
  if (image.dim() < 3 || image.size(0) != 1) {
    throw std::invalid_argument("sliding window: expected one image (1, C, *S), got " +
                                std::to_string(image.dim()) + " axes");
  }
  CheckOptions(static_cast<size_t>(image.dim() - 2), o);
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

// `t` (N, C, *S) narrowed to the window at `start`.
torch::Tensor Window(const torch::Tensor& t, const std::vector<int64_t>& start,
                     const std::vector<int64_t>& window) {
  torch::Tensor w = t;
  for (size_t a = 0; a < start.size(); ++a)
    w = w.narrow(static_cast<int64_t>(a) + 2, start[a], window[a]);
  return w;
}

}  // namespace

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

SlidingWindow::SlidingWindow(std::vector<int64_t> spatial, const SlidingWindowOptions& options)
    : spatial_(std::move(spatial)), options_(options) {
  CheckOptions(spatial_.size(), options_);
  options_.window = WindowFor(spatial_, options.window);
  slices_ = options_.window.size() != options.window.size();
  padded_ = PaddedSize(spatial_, options_.window);
  for (size_t a = 0; a < spatial_.size(); ++a) before_.push_back((padded_[a] - spatial_[a]) / 2);
  starts_ = WindowGrid(spatial_, options_.window, options_.overlap);
}

torch::Tensor SlidingWindow::Pad(const torch::Tensor& image) const {
  std::vector<int64_t> pad;  // constant_pad_nd: the last axis first
  bool padded = false;
  for (size_t a = spatial_.size(); a-- > 0;) {
    const int64_t diff = padded_[a] - spatial_[a];
    pad.push_back(before_[a]);
    pad.push_back(diff - before_[a]);
    padded = padded || diff > 0;
  }
  return padded ? torch::constant_pad_nd(image, pad, 0) : image;
}

torch::Tensor SlidingWindow::Windows(const torch::Tensor& padded, int64_t first, int64_t count,
                                     int64_t fill) const {
  std::vector<torch::Tensor> windows;
  for (int64_t i = first; i < first + count; ++i)
    windows.push_back(Window(padded, starts_.at(static_cast<size_t>(i)), options_.window));
  if (fill > count) {
    std::vector<int64_t> shape{fill - count, padded.size(1)};
    shape.insert(shape.end(), options_.window.begin(), options_.window.end());
    windows.push_back(torch::zeros(shape, padded.options()));
  }
  const torch::Tensor out = torch::cat(windows);  // (n, C, *w)
  return slices_ ? out.squeeze(2) : out;
}

void SlidingWindow::Blend(int64_t first, int64_t count, const torch::Tensor& network_logits) {
  const torch::Tensor logits = slices_ ? network_logits.unsqueeze(2) : network_logits;
  if (!sum_.defined()) {
    const auto f32 = logits.options().dtype(torch::kFloat32);
    std::vector<int64_t> shape{1, logits.size(1)};
    shape.insert(shape.end(), padded_.begin(), padded_.end());
    sum_ = torch::zeros(shape, f32);
    shape[1] = 1;
    count_ = torch::zeros(shape, f32);
    std::vector<int64_t> weight_shape{1, 1};
    weight_shape.insert(weight_shape.end(), options_.window.begin(), options_.window.end());
    weight_ =
        ImportanceMap(options_.window, options_.gaussian, options_.sigma_scale, logits.device())
            .view(weight_shape);
  }
  for (int64_t j = 0; j < count; ++j) {
    const std::vector<int64_t>& start = starts_.at(static_cast<size_t>(first + j));
    Window(sum_, start, options_.window).add_(logits.narrow(0, j, 1) * weight_);
    Window(count_, start, options_.window).add_(weight_);
  }
}

torch::Tensor SlidingWindow::Result() const {
  torch::Tensor out = sum_ / count_;
  for (size_t a = 0; a < spatial_.size(); ++a)
    out = out.narrow(static_cast<int64_t>(a) + 2, before_[a], spatial_[a]);
  return out.contiguous();
}

SlidingWindowOptions ValidationWindows(const Config& config) {
  SlidingWindowOptions o;
  o.window.assign(config.data.size.begin(), config.data.size.end());
  o.overlap = config.validate.overlap;
  o.batch = MicroBatchSamples(config);
  return o;
}

int64_t WindowCount(const std::vector<int64_t>& spatial, const SlidingWindowOptions& options) {
  return static_cast<int64_t>(WindowGrid(spatial, options.window, options.overlap).size());
}

torch::Tensor SlidingWindowLogits(const WindowNet& net, const torch::Tensor& image,
                                  const SlidingWindowOptions& options,
                                  const torch::Device& device) {
  Check(image, options);
  SlidingWindow sw(std::vector<int64_t>(image.sizes().begin() + 2, image.sizes().end()), options);
  const torch::Tensor x = sw.Pad(image);  // (1, C, *P)
  for (int64_t first = 0; first < sw.size(); first += options.batch) {
    const int64_t count = std::min<int64_t>(options.batch, sw.size() - first);
    const torch::Tensor windows = sw.Windows(x, first, count).to(device);  // (n, C, *w)
    sw.Blend(first, count, Predict(net, windows, options.mirror));         // (n, K, *w)
  }
  return sw.Result();
}

}  // namespace up
