// See augment.h.
#include "common/data/augment.h"

#include <ATen/CPUGeneratorImpl.h>

#include <vector>

namespace up {
namespace {

// The spatial axes of an image (C, *S): 1..dim-1.
std::vector<int64_t> SpatialAxes(const torch::Tensor& image) {
  std::vector<int64_t> axes;
  for (int64_t d = 1; d < image.dim(); ++d) axes.push_back(d);
  return axes;
}

}  // namespace

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

}  // namespace up
