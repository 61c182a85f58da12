// Intensity augmentations of a training image (C, *S), each one function of
// the image and the parameter PatchDraw holds, as nnU-Net's defaults apply
// them (probability per sample and range):
//
//   noise       0.10  Gaussian, variance U(0, 0.1)
//   brightness  0.15  x * U(0.75, 1.25)
//   contrast    0.15  (x - mean) * U(0.75, 1.25) + mean per channel, kept within its range
//   gamma       0.30  ((x - min) / range)^U(0.7, 1.5) * range + min per channel,
//                     its mean and standard deviation restored
//
// The spatial ones (scale 0.2 U(0.7, 1.4); rot90 in the plane of the last
// two axes where the patch is square there; mirror 0.5 per axis) are part of
// cutting the patch (patch_sampler.h). Deterministic: the same image and
// parameters give the same bits.
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace up {

torch::Tensor AddNoise(const torch::Tensor& image, double sigma, uint64_t seed);
torch::Tensor ScaleBrightness(const torch::Tensor& image, double factor);
torch::Tensor ScaleContrast(const torch::Tensor& image, double factor);
torch::Tensor AdjustGamma(const torch::Tensor& image, double gamma);

}  // namespace up
