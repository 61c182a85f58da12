// U-Net layers; see unet.h. The 2-D/3-D choice is made once per layer by the
// Make* factories below, so the architecture is written once.
#include "common/model/unet.h"

#include "common/model/level_checkpoint.h"

#include <algorithm>

namespace up {
namespace {

namespace nn = torch::nn;

nn::AnyModule MakeConv(int dims, int in, int out, int kernel, bool bias) {
  if (dims == 2)
    return nn::AnyModule(
        nn::Conv2d(nn::Conv2dOptions(in, out, kernel).padding(kernel / 2).bias(bias)));
  return nn::AnyModule(
      nn::Conv3d(nn::Conv3dOptions(in, out, kernel).padding(kernel / 2).bias(bias)));
}

nn::AnyModule MakeUpConv(int dims, int in, int out) {
  if (dims == 2)
    return nn::AnyModule(nn::ConvTranspose2d(nn::ConvTranspose2dOptions(in, out, 2).stride(2)));
  return nn::AnyModule(nn::ConvTranspose3d(nn::ConvTranspose3dOptions(in, out, 2).stride(2)));
}

nn::AnyModule MakeNorm(const ModelConfig& c, int channels) {
  if (c.norm == "group")
    return nn::AnyModule(nn::GroupNorm(nn::GroupNormOptions(c.groups, channels)));
  if (c.norm == "instance") {
    if (c.dims == 2)
      return nn::AnyModule(nn::InstanceNorm2d(nn::InstanceNorm2dOptions(channels).affine(true)));
    return nn::AnyModule(nn::InstanceNorm3d(nn::InstanceNorm3dOptions(channels).affine(true)));
  }
  if (c.dims == 2) return nn::AnyModule(nn::BatchNorm2d(nn::BatchNorm2dOptions(channels)));
  return nn::AnyModule(nn::BatchNorm3d(nn::BatchNorm3dOptions(channels)));
}

// [3x3 conv (no bias), norm, ReLU] x 2.
nn::Sequential DoubleConv(const ModelConfig& c, int in, int out) {
  nn::Sequential seq;
  seq->push_back("conv1", MakeConv(c.dims, in, out, 3, /*bias=*/false));
  seq->push_back("norm1", MakeNorm(c, out));
  seq->push_back("relu1", nn::AnyModule(nn::ReLU(nn::ReLUOptions(/*inplace=*/true))));
  seq->push_back("conv2", MakeConv(c.dims, out, out, 3, /*bias=*/false));
  seq->push_back("norm2", MakeNorm(c, out));
  seq->push_back("relu2", nn::AnyModule(nn::ReLU(nn::ReLUOptions(/*inplace=*/true))));
  return seq;
}

uint64_t Mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t EncoderInitSeed(uint64_t seed) { return Mix(seed * 2 + 0) >> 1; }
uint64_t DecoderInitSeed(uint64_t seed) { return Mix(seed * 2 + 1) >> 1; }

BoundarySpec BoundaryShapes(const ModelConfig& model, const std::vector<int>& size, int64_t n) {
  BoundarySpec spec;
  const int levels = static_cast<int>(model.features.size());
  auto shape_at = [&](int level, int64_t channels) {
    std::vector<int64_t> shape{n, channels};
    for (int s : size) shape.push_back(s >> level);
    return shape;
  };
  spec.names.push_back("bottleneck");
  spec.shapes.push_back(shape_at(levels, 2 * model.features.back()));
  for (int i = 0; i < levels; ++i) {
    spec.names.push_back("skip" + std::to_string(i));
    spec.shapes.push_back(shape_at(i, model.features[i]));
  }
  return spec;
}

std::string BoundarySignature(const Config& config) {
  const BoundarySpec spec = BoundaryShapes(config.model, config.data.size,
                                           config.train.batch_size / config.train.micro_batches);
  std::string out;
  for (size_t i = 0; i < spec.names.size(); ++i) {
    out += (i ? " " : "") + spec.names[i] + ":";
    for (size_t d = 0; d < spec.shapes[i].size(); ++d)
      out += (d ? "x" : "") + std::to_string(spec.shapes[i][d]);
    out += config.train.precision == "bf16" ? ":autocast-bf16" : ":f32";
  }
  return out;
}

UNetEncoderImpl::UNetEncoderImpl(const ModelConfig& c, uint64_t seed) : dims_(c.dims) {
  torch::manual_seed(seed);
  int in = c.in_channels;
  for (size_t i = 0; i < c.features.size(); ++i) {
    levels_.push_back(
        register_module("down" + std::to_string(i), DoubleConv(c, in, c.features[i])));
    in = c.features[i];
  }
  bottleneck_ = register_module("bottleneck", DoubleConv(c, in, 2 * in));
}

Boundary UNetEncoderImpl::forward(const torch::Tensor& x) {
  Boundary out;
  torch::Tensor h = x;  // (N, C, *S)
  for (auto& level : levels_) {
    torch::Tensor skip =  // (N, F[i], S / 2^i)
        checkpointing_ ? CheckpointedLevel({level.ptr().get()},
                                           [level](const std::vector<torch::Tensor>& in) mutable {
                                             return level->forward(in[0]);
                                           },
                                           {h})
                       : level->forward(h);
    h = dims_ == 2 ? torch::max_pool2d(skip, 2) : torch::max_pool3d(skip, 2);
    out.skips.push_back(skip);
  }
  out.bottleneck =  // (N, 2*F[L-1], S / 2^L)
      checkpointing_
          ? CheckpointedLevel({bottleneck_.ptr().get()},
                              [b = bottleneck_](const std::vector<torch::Tensor>& in) mutable {
                                return b->forward(in[0]);
                              },
                              {h})
          : bottleneck_->forward(h);
  return out;
}

UNetDecoderImpl::UNetDecoderImpl(const ModelConfig& c, uint64_t seed) {
  torch::manual_seed(seed);
  const int levels = static_cast<int>(c.features.size());
  ups_.resize(levels);
  convs_.resize(levels);
  int in = 2 * c.features.back();
  for (int i = levels - 1; i >= 0; --i) {
    const std::string idx = std::to_string(i);
    ups_[i] = MakeUpConv(c.dims, in, c.features[i]);
    register_module("up" + idx, ups_[i].ptr());
    convs_[i] = register_module("conv" + idx, DoubleConv(c, 2 * c.features[i], c.features[i]));
    in = c.features[i];
  }
  head_ = MakeConv(c.dims, c.features[0], c.num_classes, 1, /*bias=*/true);
  register_module("head", head_.ptr());
}

torch::Tensor UNetDecoderImpl::forward(const Boundary& b) {
  torch::Tensor h = b.bottleneck;  // (N, 2*F[L-1], S / 2^L)
  for (int i = static_cast<int>(convs_.size()) - 1; i >= 0; --i) {
    auto level = [up = ups_[i], conv = convs_[i]](const std::vector<torch::Tensor>& in) mutable {
      torch::Tensor upsampled = up.forward(in[0]);              // (N, F[i], S / 2^i)
      return conv->forward(torch::cat({in[1], upsampled}, 1));  // (N, F[i], S / 2^i)
    };
    h = checkpointing_ ? CheckpointedLevel({ups_[i].ptr().get(), convs_[i].ptr().get()}, level,
                                           {h, b.skips[i]})
                       : level({h, b.skips[i]});
  }
  return head_.forward(h);  // (N, num_classes, *S)
}

UNetImpl::UNetImpl(const ModelConfig& c, uint64_t seed) {
  encoder = register_module("encoder", UNetEncoder(c, EncoderInitSeed(seed)));
  decoder = register_module("decoder", UNetDecoder(c, DecoderInitSeed(seed)));
}

int64_t ParameterCount(const torch::nn::Module& module) {
  int64_t n = 0;
  for (const torch::Tensor& p : module.parameters()) n += p.numel();
  return n;
}

std::vector<std::pair<std::string, torch::Tensor>> NamedState(const torch::nn::Module& module) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& p : module.named_parameters(/*recurse=*/true))
    out.emplace_back(p.key(), p.value());
  for (const auto& b : module.named_buffers(/*recurse=*/true)) out.emplace_back(b.key(), b.value());
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return out;
}

}  // namespace up
