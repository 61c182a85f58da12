// The classic U-Net, split into the two halves that the pipeline runs as
// separate processes.
//
//   UNetEncoder: per level a double convolution ([3x3 conv without bias, norm,
//     ReLU] x2) whose output is that level's skip, then a 2x max-pool; after the
//     last level a bottleneck double convolution to twice the last width.
//   UNetDecoder: per level, deepest first, a 2x2 stride-2 transposed conv, the
//     concatenation [skip, upsampled] on channels, a double convolution; then a
//     1x1 conv to `num_classes`.
//   UNet: the two composed, with parameter names `encoder.*` and `decoder.*`.
//
// 2-D (N, C, H, W) and 3-D (N, C, D, H, W) come from the same code. Each half
// seeds the global generator itself before creating its layers, so a process
// that builds only one half gets exactly the weights that UNet has for it.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "common/config.h"

namespace up {

// What crosses the boundary from encoder to decoder (and, as gradients, back).
struct Boundary {
  torch::Tensor bottleneck;          // (N, 2*F[L-1], S / 2^L)
  std::vector<torch::Tensor> skips;  // skips[i]: (N, F[i], S / 2^i), i = 0..L-1
};

// Names and shapes of the boundary tensors for a micro-batch of `n` samples,
// in wire order: "bottleneck", then "skip0".."skip{L-1}".
struct BoundarySpec {
  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> shapes;
};
BoundarySpec BoundaryShapes(const ModelConfig& model, const std::vector<int>& size, int64_t n);

// One line naming every boundary tensor with its shape and dtype for a
// micro-batch of `config`, e.g. "bottleneck:2x128x4x4:f32 skip0:...": both
// stages and the launcher compare it in the handshake.
std::string BoundarySignature(const Config& config);

// The seeds each half is built from; distinct so the halves differ.
uint64_t EncoderInitSeed(uint64_t seed);
uint64_t DecoderInitSeed(uint64_t seed);

class UNetEncoderImpl : public torch::nn::Module {
 public:
  UNetEncoderImpl(const ModelConfig& config, uint64_t seed);
  Boundary forward(const torch::Tensor& x);  // x: (N, in_channels, *S)
  // Each level (and the bottleneck) recomputed in backward (level_checkpoint.h).
  void set_checkpointing(bool on) { checkpointing_ = on; }

 private:
  int dims_;
  bool checkpointing_ = false;
  std::vector<torch::nn::Sequential> levels_;
  torch::nn::Sequential bottleneck_{nullptr};
};
TORCH_MODULE(UNetEncoder);

class UNetDecoderImpl : public torch::nn::Module {
 public:
  UNetDecoderImpl(const ModelConfig& config, uint64_t seed);
  torch::Tensor forward(const Boundary& b);  // -> logits (N, num_classes, *S)
  // Each level (upsampling, concatenation, double conv) recomputed in backward.
  void set_checkpointing(bool on) { checkpointing_ = on; }

 private:
  bool checkpointing_ = false;
  std::vector<torch::nn::AnyModule> ups_;     // ups_[i] feeds level i
  std::vector<torch::nn::Sequential> convs_;  // convs_[i] after the concat at level i
  torch::nn::AnyModule head_;
};
TORCH_MODULE(UNetDecoder);

class UNetImpl : public torch::nn::Module {
 public:
  UNetImpl(const ModelConfig& config, uint64_t seed);
  torch::Tensor forward(const torch::Tensor& x) { return decoder->forward(encoder->forward(x)); }

  UNetEncoder encoder{nullptr};
  UNetDecoder decoder{nullptr};
};
TORCH_MODULE(UNet);

// Parameters and buffers of `module`, sorted by name: the order of digests,
// checkpoints and recordings.
std::vector<std::pair<std::string, torch::Tensor>> NamedState(const torch::nn::Module& module);

// How many parameter elements `module` has (its own and its children's).
int64_t ParameterCount(const torch::nn::Module& module);

}  // namespace up
