// See augment.h.
#include "common/data/augment.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace up {
namespace {

// The spatial axes of an image (C, *S): 1..dim-1.
std::vector<int64_t> SpatialAxes(const torch::Tensor& image) {
  std::vector<int64_t> axes;
  for (int64_t d = 1; d < image.dim(); ++d) axes.push_back(d);
  return axes;
}

// A normalised Gaussian kernel of `sigma` voxels, 6 sigma wide (odd).
torch::Tensor GaussianKernel(double sigma) {
  int64_t size = std::lround(sigma * 6 + 0.5);
  if (size % 2 == 0) size += 1;
  const double half = (size - 1) * 0.5;
  const torch::Tensor x = torch::linspace(-half, half, size, torch::kFloat64);
  const torch::Tensor pdf = torch::exp(-0.5 * (x / sigma).pow(2));
  return (pdf / pdf.sum()).to(torch::kFloat32);  // (size,)
}

// `channel` (1, *S) blurred along spatial axis `axis` (0-based), borders reflected.
torch::Tensor BlurAxis(const torch::Tensor& channel, double sigma, int64_t axis) {
  namespace F = torch::nn::functional;
  const int64_t dims = channel.dim() - 1;
  const torch::Tensor k = GaussianKernel(sigma);
  const int64_t half = k.size(0) / 2;
  std::vector<int64_t> kernel_shape(static_cast<size_t>(dims) + 2, 1);
  kernel_shape[static_cast<size_t>(2 + axis)] = k.size(0);
  std::vector<int64_t> pad(static_cast<size_t>(2 * dims), 0);  // last axis first
  pad[static_cast<size_t>(2 * (dims - 1 - axis))] = half;
  pad[static_cast<size_t>(2 * (dims - 1 - axis) + 1)] = half;
  // Reflection needs the axis longer than the padding; a shorter one replicates.
  const bool reflect = channel.size(1 + axis) > half;
  F::PadFuncOptions how(pad);
  if (reflect) {
    how.mode(torch::kReflect);
  } else {
    how.mode(torch::kReplicate);
  }
  const torch::Tensor padded = F::pad(channel.unsqueeze(0), how);
  const torch::Tensor weight = k.reshape(kernel_shape);
  torch::Tensor out;
  if (dims == 1) out = F::conv1d(padded, weight);
  if (dims == 2) out = F::conv2d(padded, weight);
  if (dims == 3) out = F::conv3d(padded, weight);
  return out[0];
}

}  // namespace

torch::Tensor GaussianBlur(const torch::Tensor& image,
                           const std::vector<std::vector<double>>& sigmas) {
  std::vector<torch::Tensor> channels;
  for (int64_t c = 0; c < image.size(0); ++c) {
    torch::Tensor ch = image.narrow(0, c, 1);  // (1, *S)
    const size_t i = static_cast<size_t>(c);
    if (i < sigmas.size())
      for (size_t a = 0; a < sigmas[i].size(); ++a)
        ch = BlurAxis(ch, sigmas[i][a], static_cast<int64_t>(a));
    channels.push_back(ch);
  }
  return torch::cat(channels, 0);
}

torch::Tensor ResizeLinear(const torch::Tensor& x, const std::vector<int64_t>& size) {
  namespace F = torch::nn::functional;
  F::InterpolateFuncOptions linear = F::InterpolateFuncOptions().size(size).align_corners(false);
  if (size.size() == 3) {
    linear.mode(torch::kTrilinear);
  } else if (size.size() == 2) {
    linear.mode(torch::kBilinear);
  } else {
    linear.mode(torch::kLinear);
  }
  return F::interpolate(x, linear);
}

torch::Tensor SimulateLowResolution(const torch::Tensor& image,
                                    const std::vector<std::vector<double>>& scales) {
  const std::vector<int64_t> size(image.sizes().begin() + 1, image.sizes().end());
  std::vector<torch::Tensor> channels;
  for (int64_t c = 0; c < image.size(0); ++c) {
    torch::Tensor ch = image.narrow(0, c, 1).unsqueeze(0);  // (1, 1, *S)
    const size_t i = static_cast<size_t>(c);
    if (i < scales.size() && !scales[i].empty()) {
      std::vector<int64_t> low;
      bool changes = false;
      for (size_t a = 0; a < size.size(); ++a) {
        low.push_back(std::max<int64_t>(1, std::llround(size[a] * scales[i][a])));
        changes = changes || low.back() != size[a];
      }
      if (changes) {
        // 'nearest-exact' down: output voxel j reads input voxel (j + 0.5) * in / out.
        for (size_t a = 0; a < size.size(); ++a) {
          const torch::Tensor at = ((torch::arange(low[a], torch::kFloat64) + 0.5) *
                                    (static_cast<double>(size[a]) / low[a]))
                                       .floor()
                                       .clamp_max(static_cast<double>(size[a] - 1))
                                       .to(torch::kLong);
          ch = ch.index_select(static_cast<int64_t>(2 + a), at);
        }
        ch = ResizeLinear(ch, size);
      }
    }
    channels.push_back(ch[0]);
  }
  return torch::cat(channels, 0);
}

torch::Tensor AddNoise(const torch::Tensor& image, double sigma, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return image + torch::randn(image.sizes(), gen, image.options()) * sigma;
}

torch::Tensor ScaleBrightness(const torch::Tensor& image, double factor) { return image * factor; }

torch::Tensor ScaleContrast(const torch::Tensor& image, double factor) {
  const std::vector<int64_t> axes = SpatialAxes(image);
  const torch::Tensor mean = image.mean(axes, /*keepdim=*/true);  // (C, 1, ...)
  const torch::Tensor lo = image.amin(axes, true), hi = image.amax(axes, true);
  return torch::minimum(torch::maximum((image - mean) * factor + mean, lo), hi);
}

torch::Tensor AdjustGamma(const torch::Tensor& image, double gamma) {
  const std::vector<int64_t> axes = SpatialAxes(image);
  const torch::Tensor mean = image.mean(axes, true), sd = image.std(axes, true, true);
  const torch::Tensor lo = image.amin(axes, true);
  const torch::Tensor range = image.amax(axes, true) - lo + 1e-7;
  const torch::Tensor y = ((image - lo) / range).pow(gamma) * range + lo;
  // The channel's mean and standard deviation as before.
  const torch::Tensor y_mean = y.mean(axes, true), y_sd = y.std(axes, true, true);
  return (y - y_mean) / (y_sd + 1e-8) * sd + mean;
}

torch::Tensor AdjustGammaInverted(const torch::Tensor& image, double gamma) {
  return -AdjustGamma(-image, gamma);
}

}  // namespace up
