// Lean blocks (`model.memory: lean`): a block's arithmetic in another order,
// holding less at its backward's peak. Each function here computes what a
// block as written computes, to rounding (the sums run in another order, so
// not bit for bit), and says what it holds that the written block does not.
// docs/MEMORY.md ("Lean blocks") has the figures.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace up {

// `conv` (a Conv2d or Conv3d module: its weight, bias, stride, padding and
// dilation; one group) over the channel concatenation of `parts`, without
// the concatenated tensor:
//
//   parts[k]: (N, C_k, *S), sum of C_k = the conv's in_channels
//   returns   (N, out, *S') = conv->forward(torch::cat(parts, 1)) to rounding
//
// computed as the sum of each part's convolution with its slice of the
// weight, added into one output. Where a part's convolution keeps the size
// of the first spatial axis (stride 1, no dilation, "same" padding) and the
// axis is long, it runs a slab of that axis at a time (a quarter, at least
// 16 rows, each with its halo): so the forward, and a rebuild's forward
// inside a checkpointed backward, holds the output and one slab's
// convolution at once, not the output and a whole part's (the kernel's
// copy of its input and its output). The graph saves the parts themselves (which their makers hold
// anyway) instead of a concatenation as wide as all of them, and the
// backward of the concatenation has no gradient as wide as all of them
// either. The backward takes the parts one at a time, `free_first` first:
// its weight gradient, then its input gradient, and the part is let go
// between the two (so give first the part only this convolution holds: a
// decoder level's upsampled tensor). The backward runs once (no retain_graph).
torch::Tensor ConcatConv(torch::nn::Module& conv, const std::vector<torch::Tensor>& parts,
                         size_t free_first);

// `up` (a U-Net's upsampling: a ConvTranspose2d or ConvTranspose3d whose
// kernel is its stride, no padding) on x, the same bits as up.forward(x):
//
//   x: (N, C, *S) -> (N, out, *S * stride)
//
// Where the output is large (as ConcatConv's slabs), it is made a slab of
// x's first spatial axis at a time (a quarter) straight into the one
// output, so the kernel's output in its own layout and its copy into the
// tensor's are a slab's, not two outputs at once (a rebuilt decoder block
// starts with this). Its backward is the transposed convolution's own. Any
// other module, or a small output: up.forward(x).
torch::Tensor Upsample(torch::nn::AnyModule& up, const torch::Tensor& x);

// What follows a norm: nothing, ReLU (slope 0) or LeakyReLU (slope > 0).
struct Activation {
  bool on = false;
  double slope = 0.0;
};

// `norm` (BatchNorm, InstanceNorm or GroupNorm, 2-D or 3-D) on x, then the
// activation, in one step whose graph saves only x (N, C, *S) and the
// norm's weight and bias: the norm's output (which an in-place activation
// keeps as its own) is not saved. The forward is the norm module's own
// forward and the activation in place, the same bits as the block as
// written (running statistics updated as it does); the backward recomputes
// the normalised input from x a box of whole statistics groups at a time
// (channels, a sample's channels or groups; a 32nd of x, or 2^18 elements), so it
// holds the gradient it makes and one box's scratch. The result is the gradient of the norm
// and the activation to rounding, except where the norm's output is within
// rounding of the activation's kink (0): there the recomputed output can
// fall on the other side and take the other slope (a few elements in a
// million; either is a subgradient there). Without grad mode, or for a norm that
// uses running statistics (evaluation), it is the module's forward and the
// activation as written.
torch::Tensor NormAct(torch::nn::Module& norm, const torch::Tensor& x, Activation act);

}  // namespace up
