// Intensity augmentations of a training image (C, *S), each one function of
// the image and the parameter PatchDraw holds, as nnU-Net's defaults apply
// them (probability per sample and range):
//
//   noise       0.10  Gaussian, variance U(0, 0.1)
//   blur        0.20  each channel with p 0.5: a Gaussian of sigma U(0.5, 1)
//                     per axis, separable, its kernel 6 sigma wide, the
//                     borders reflected
//   brightness  0.15  x * U(0.75, 1.25)
//   contrast    0.15  (x - mean) * U(0.75, 1.25) + mean per channel, kept within its range
//   lowres      0.25  each channel with p 0.5: down to U(0.5, 1) of its size
//                     (nearest), back up (linear)
//   gamma_inverted 0.10  gamma below on the channel upside down (-x)
//   gamma       0.30  ((x - min) / range)^U(0.7, 1.5) * range + min per channel,
//                     its mean and standard deviation restored
//
// The spatial ones (scale 0.2 U(0.7, 1.4); rotate 0.2, up to 30 degrees
// about each axis in 3-D, 180 in 2-D, as nnU-Net; rot90 in the plane of the
// last two axes where the patch is square there; mirror 0.5 per axis) are
// part of cutting the patch (patch_sampler.h). Deterministic: the same
// image and parameters give the same bits.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace up {

torch::Tensor AddNoise(const torch::Tensor& image, double sigma, uint64_t seed);
torch::Tensor ScaleBrightness(const torch::Tensor& image, double factor);
torch::Tensor ScaleContrast(const torch::Tensor& image, double factor);
torch::Tensor AdjustGamma(const torch::Tensor& image, double gamma);
// AdjustGamma of -image, negated back: the gamma bends the other end of the
// range (nnU-Net's GammaTransform with p_invert_image 1).
torch::Tensor AdjustGammaInverted(const torch::Tensor& image, double gamma);
// image (C, *S) with channel c blurred by sigmas[c][a] along spatial axis a
// (no entries: channel c as it is).
torch::Tensor GaussianBlur(const torch::Tensor& image,
                           const std::vector<std::vector<double>>& sigmas);
// x (N, C, *S) resized to `size` (*S') by linear, bilinear or trilinear
// interpolation as S has 1, 2 or 3 axes (align_corners false): the image
// side of scaling a patch and of simulating low resolution.
torch::Tensor ResizeLinear(const torch::Tensor& x, const std::vector<int64_t>& size);
// image (C, *S) with channel c resampled down to round(S * scales[c][a])
// (nearest) and back up to S (linear); a scale of 1 on every axis (or no
// entries) leaves the channel as it is.
torch::Tensor SimulateLowResolution(const torch::Tensor& image,
                                    const std::vector<std::vector<double>>& scales);

}  // namespace up
