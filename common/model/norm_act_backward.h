// The backward of a norm followed by an activation, from the norm's input
// alone (the lean block's NormAct, lean_block.h): the normalised input and
// the activation's mask are recomputed, not saved.
//
// Two implementations of one formula. On a CPU, for contiguous fp32, one
// fused loop per statistics group: three passes over the group (its
// statistics; the gradient's two sums; the gradient), each group on one
// thread, its sums in double. Elsewhere (a GPU, another dtype), tensor ops a
// box of whole groups at a time. The two agree to rounding (a test holds
// them to each other on this CPU, so the GPU's formula is tested here too).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace up {

// How a norm groups its statistics: per channel over the batch (BatchNorm
// training), per sample and channel (InstanceNorm), per sample and group of
// channels (GroupNorm).
enum class StatGroups : int64_t { kChannel, kSampleChannel, kSampleGroup };

struct NormActSpec {
  StatGroups groups = StatGroups::kChannel;
  int64_t num_groups = 1;  // kSampleGroup: channels / num_groups each
  double eps = 1e-5;
  bool act = false;    // an activation follows the norm
  double slope = 0.0;  // its slope below 0: 0 for ReLU
};

struct NormActGrads {
  at::Tensor x;       // (N, C, *S)
  at::Tensor weight;  // (C), undefined without affine
  at::Tensor bias;    // (C), undefined without affine
};

// x: the norm's input (N, C, *S); grad_y: the gradient of the activation's
// output (N, C, *S); weight, bias: the norm's affine parameters (C) each, or
// both undefined. The norm normalises with its batch's statistics (training).
NormActGrads NormActBackward(const at::Tensor& x, const at::Tensor& grad_y,
                             const at::Tensor& weight, const at::Tensor& bias,
                             const NormActSpec& spec);

// The tensor-op implementation on any device: what NormActBackward runs
// where its fused loop does not apply. It holds one box's scratch at a time
// (whole groups, a 32nd of x or 2^18 elements).
NormActGrads NormActBackwardByOps(const at::Tensor& x, const at::Tensor& grad_y,
                                  const at::Tensor& weight, const at::Tensor& bias,
                                  const NormActSpec& spec);

// The dimensions of a (N, C, *S) tensor from `first` on, but the channels
// (DimsButChannels(5, 0) = {0, 2, 3, 4}).
std::vector<int64_t> DimsButChannels(int64_t dim, int64_t first);

}  // namespace up
