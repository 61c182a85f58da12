// nnU-Net's U-Nets as levels; see nnunet_unet.h. Each class below is one of
// dynamic_network_architectures' building blocks, with its attribute names.
#include "common/model/nnunet_unet.h"

#include "common/model/lean_block.h"
#include "common/model/unet.h"

namespace up {
namespace {

namespace nn = torch::nn;
using Ints = std::vector<int64_t>;

Ints ToInts(const std::vector<int>& v) { return Ints(v.begin(), v.end()); }

nn::AnyModule Conv(int dims, int64_t in, int64_t out, const Ints& kernel, const Ints& stride,
                   bool bias) {
  Ints pad;
  for (int64_t k : kernel) pad.push_back((k - 1) / 2);
  if (dims == 2)
    return nn::AnyModule(nn::Conv2d(nn::Conv2dOptions(in, out, torch::ExpandingArray<2>(kernel))
                                        .stride(torch::ExpandingArray<2>(stride))
                                        .padding(torch::ExpandingArray<2>(pad))
                                        .bias(bias)));
  return nn::AnyModule(nn::Conv3d(nn::Conv3dOptions(in, out, torch::ExpandingArray<3>(kernel))
                                      .stride(torch::ExpandingArray<3>(stride))
                                      .padding(torch::ExpandingArray<3>(pad))
                                      .bias(bias)));
}

nn::AnyModule TransposedConv(int dims, int64_t in, int64_t out, const Ints& stride, bool bias) {
  if (dims == 2)
    return nn::AnyModule(
        nn::ConvTranspose2d(nn::ConvTranspose2dOptions(in, out, torch::ExpandingArray<2>(stride))
                                .stride(torch::ExpandingArray<2>(stride))
                                .bias(bias)));
  return nn::AnyModule(
      nn::ConvTranspose3d(nn::ConvTranspose3dOptions(in, out, torch::ExpandingArray<3>(stride))
                              .stride(torch::ExpandingArray<3>(stride))
                              .bias(bias)));
}

nn::AnyModule Norm(const NnunetArchitecture& a, int64_t channels) {
  if (a.norm == "batch") {
    if (a.dims == 2)
      return nn::AnyModule(nn::BatchNorm2d(nn::BatchNorm2dOptions(channels)
                                               .eps(a.norm_eps)
                                               .momentum(a.norm_momentum)
                                               .affine(a.norm_affine)));
    return nn::AnyModule(nn::BatchNorm3d(nn::BatchNorm3dOptions(channels)
                                             .eps(a.norm_eps)
                                             .momentum(a.norm_momentum)
                                             .affine(a.norm_affine)));
  }
  if (a.dims == 2)
    return nn::AnyModule(nn::InstanceNorm2d(
        nn::InstanceNorm2dOptions(channels).eps(a.norm_eps).affine(a.norm_affine)));
  return nn::AnyModule(nn::InstanceNorm3d(
      nn::InstanceNorm3dOptions(channels).eps(a.norm_eps).affine(a.norm_affine)));
}

torch::Tensor Nonlin(const NnunetArchitecture& a, torch::Tensor x) {
  if (a.nonlin == "leaky_relu") return torch::leaky_relu_(x, a.negative_slope);
  if (a.nonlin == "relu") return torch::relu_(x);
  return x;
}

// ConvDropoutNormReLU: conv, norm (if any), nonlin (if `act`).
class ConvNormActImpl : public nn::Module {
 public:
  ConvNormActImpl(const NnunetArchitecture& a, int64_t in, int64_t out, const Ints& kernel,
                  const Ints& stride, bool bias, bool act)
      : arch_(a), act_(act) {
    conv_ = Conv(a.dims, in, out, kernel, stride, bias);
    register_module("conv", conv_.ptr());
    if (a.norm != "none") {
      norm_ = Norm(a, out);
      register_module("norm", norm_.ptr());
    }
  }
  torch::Tensor forward(const torch::Tensor& x) { return NormThenAct(conv_.forward(x)); }
  // The same on the channel concatenation of `parts`, without making it
  // (lean_block.h).
  torch::Tensor ForwardConcat(const std::vector<torch::Tensor>& parts, size_t free_first) {
    return NormThenAct(ConcatConv(*conv_.ptr(), parts, free_first));
  }
  // model.memory: lean: the norm and the nonlin as one NormAct step.
  void set_lean(bool lean) { lean_ = lean; }

 private:
  torch::Tensor NormThenAct(torch::Tensor h) {
    if (lean_ && !norm_.is_empty()) {
      const bool on = act_ && arch_.nonlin != "none" && !arch_.nonlin.empty();
      return NormAct(*norm_.ptr(), h,
                     Activation{on, arch_.nonlin == "leaky_relu" ? arch_.negative_slope : 0.0});
    }
    if (!norm_.is_empty()) h = norm_.forward(h);
    return act_ ? Nonlin(arch_, h) : h;
  }

  NnunetArchitecture arch_;
  bool act_;
  bool lean_ = false;
  nn::AnyModule conv_;
  nn::AnyModule norm_;
};
TORCH_MODULE(ConvNormAct);

// StackedConvBlocks: `convs`, the first with the stride.
class StackedConvsImpl : public nn::Module {
 public:
  StackedConvsImpl(const NnunetArchitecture& a, int n, int64_t in, int64_t out, const Ints& kernel,
                   const Ints& stride) {
    convs_ = register_module("convs", nn::ModuleList());
    for (int i = 0; i < n; ++i) {
      ConvNormAct c(a, i == 0 ? in : out, out, kernel, i == 0 ? stride : Ints(kernel.size(), 1),
                    a.conv_bias, /*act=*/true);
      convs_->push_back(c);
      blocks_.push_back(c);
    }
  }
  torch::Tensor forward(torch::Tensor x) {
    for (auto& c : blocks_) x = c->forward(x);
    return x;
  }
  const std::vector<ConvNormAct>& blocks() const { return blocks_; }

 private:
  nn::ModuleList convs_{nullptr};
  std::vector<ConvNormAct> blocks_;
};
TORCH_MODULE(StackedConvs);

// BasicBlockD (ResNet-D): conv1 (strided, nonlin), conv2 (no nonlin), a skip
// of average pooling (if strided) and a 1x1 conv + norm (if the width
// changes), the sum, then the nonlin.
class BasicBlockImpl : public nn::Module {
 public:
  BasicBlockImpl(const NnunetArchitecture& a, int64_t in, int64_t out, const Ints& kernel,
                 const Ints& stride)
      : arch_(a) {
    const Ints one(kernel.size(), 1);
    conv1_ = register_module("conv1", ConvNormAct(a, in, out, kernel, stride, a.conv_bias, true));
    conv2_ = register_module("conv2", ConvNormAct(a, out, out, kernel, one, a.conv_bias, false));
    const bool strided = stride != one;
    if (strided || in != out) {
      skip_ = register_module("skip", nn::ModuleList());
      if (strided) {
        if (a.dims == 2) {
          pool_ = nn::AnyModule(nn::AvgPool2d(nn::AvgPool2dOptions(torch::ExpandingArray<2>(stride))
                                                  .stride(torch::ExpandingArray<2>(stride))));
        } else {
          pool_ = nn::AnyModule(nn::AvgPool3d(nn::AvgPool3dOptions(torch::ExpandingArray<3>(stride))
                                                  .stride(torch::ExpandingArray<3>(stride))));
        }
        skip_->push_back(pool_.ptr());
      }
      if (in != out) {
        projection_ = ConvNormAct(a, in, out, one, one, /*bias=*/false, /*act=*/false);
        skip_->push_back(projection_);
      }
    }
  }
  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor residual = x;
    if (!pool_.is_empty()) residual = pool_.forward(residual);
    if (projection_) residual = projection_->forward(residual);
    torch::Tensor out = conv2_->forward(conv1_->forward(x));
    out += residual;
    return Nonlin(arch_, out);
  }
  void ZeroLastNorm() {  // init_last_bn_before_add_to_0
    torch::NoGradGuard no_grad;
    for (auto& p : conv2_->named_parameters())
      if (p.key().rfind("norm.", 0) == 0) p.value().zero_();
  }

 private:
  NnunetArchitecture arch_;
  ConvNormAct conv1_{nullptr}, conv2_{nullptr}, projection_{nullptr};
  nn::AnyModule pool_;  // the skip's average pooling when strided
  nn::ModuleList skip_{nullptr};
};
TORCH_MODULE(BasicBlock);

// StackedResidualBlocks: `blocks`, the first with the stride.
class StackedResidualImpl : public nn::Module {
 public:
  StackedResidualImpl(const NnunetArchitecture& a, int n, int64_t in, int64_t out,
                      const Ints& kernel, const Ints& stride) {
    list_ = register_module("blocks", nn::ModuleList());
    for (int i = 0; i < n; ++i) {
      BasicBlock b(a, i == 0 ? in : out, out, kernel, i == 0 ? stride : Ints(kernel.size(), 1));
      list_->push_back(b);
      blocks_.push_back(b);
    }
  }
  torch::Tensor forward(torch::Tensor x) {
    for (auto& b : blocks_) x = b->forward(x);
    return x;
  }
  const std::vector<BasicBlock>& blocks() const { return blocks_; }
  void ZeroLastNorms() {
    for (auto& b : blocks_) b->ZeroLastNorm();
  }

 private:
  nn::ModuleList list_{nullptr};
  std::vector<BasicBlock> blocks_;
};
TORCH_MODULE(StackedResidual);

// InitWeights_He(1e-2) on every (transposed) convolution of `m`.
void HeInit(nn::Module& m) {
  torch::NoGradGuard no_grad;
  for (auto& child : m.modules(/*include_self=*/false)) {
    const bool conv = dynamic_cast<nn::Conv2dImpl*>(child.get()) ||
                      dynamic_cast<nn::Conv3dImpl*>(child.get()) ||
                      dynamic_cast<nn::ConvTranspose2dImpl*>(child.get()) ||
                      dynamic_cast<nn::ConvTranspose3dImpl*>(child.get());
    if (!conv) continue;
    for (auto& p : child->named_parameters(/*recurse=*/false)) {
      if (p.key() == "weight") nn::init::kaiming_normal_(p.value(), 1e-2);
      if (p.key() == "bias") p.value().zero_();
    }
  }
}

// One block (a conv block or a residual block) on a level's single input.
template <typename Block>
Level BlockOf(Block block) {
  return {{block.ptr().get()},
          [block](const std::vector<torch::Tensor>& x) mutable { return block->forward(x[0]); }};
}

// A stage of blocks as a level, each block also a unit of its own.
template <typename Stage>
Level LevelOf(Stage stage) {
  Level level = BlockOf(stage);
  for (const auto& block : stage->blocks()) level.blocks.push_back(BlockOf(block));
  return level;
}

// model.memory: lean reaches every conv block of `m`.
void SetLean(nn::Module* m, const ModelConfig& c) {
  for (const auto& sub : m->modules(/*include_self=*/false))
    if (auto* block = dynamic_cast<ConvNormActImpl*>(sub.get()))
      block->set_lean(c.memory == ModelMemory::kLean);
}

}  // namespace

void BuildNnunetEncoder(UNetEncoderImpl* enc, const ModelConfig& c) {
  const NnunetArchitecture& a = c.nnunet;
  auto stages = enc->register_module("stages", nn::ModuleList());
  int64_t in = c.in_channels;
  if (a.network_class == "PlainConvUNet") {
    for (int s = 0; s < a.stages(); ++s) {
      // Each stage is a Sequential holding one StackedConvBlocks: "stages.s.0".
      auto wrap = nn::ModuleList();
      StackedConvs convs(a, a.blocks[s], in, a.features[s], ToInts(a.kernel_sizes[s]),
                         ToInts(a.strides[s]));
      wrap->push_back(convs);
      stages->push_back(wrap);
      enc->AddLevel(LevelOf(convs));
      in = a.features[s];
    }
    HeInit(*enc);
    return;
  }
  StackedConvs stem(a, 1, in, a.features[0], ToInts(a.kernel_sizes[0]),
                    Ints(static_cast<size_t>(a.dims), 1));
  enc->register_module("stem", stem);
  in = a.features[0];
  std::vector<StackedResidual> blocks;
  for (int s = 0; s < a.stages(); ++s) {
    StackedResidual stage(a, a.blocks[s], in, a.features[s], ToInts(a.kernel_sizes[s]),
                          ToInts(a.strides[s]));
    stages->push_back(stage);
    blocks.push_back(stage);
    if (s == 0) {  // level 0: the stem, then stage 0
      Level level{{stem.ptr().get(), stage.ptr().get()},
                  [stem, stage](const std::vector<torch::Tensor>& x) mutable {
                    return stage->forward(stem->forward(x[0]));
                  }};
      for (const auto& block : stem->blocks()) level.blocks.push_back(BlockOf(block));
      for (const auto& block : stage->blocks()) level.blocks.push_back(BlockOf(block));
      enc->AddLevel(std::move(level));
    } else {
      enc->AddLevel(LevelOf(stage));
    }
    in = a.features[s];
  }
  HeInit(*enc);
  for (auto& b : blocks) b->ZeroLastNorms();
  SetLean(enc, c);
}

void BuildNnunetDecoder(UNetDecoderImpl* dec, const ModelConfig& c) {
  const bool lean = c.memory == ModelMemory::kLean;
  const NnunetArchitecture& a = c.nnunet;
  const int n = a.stages();
  auto stages = dec->register_module("stages", nn::ModuleList());
  auto transpconvs = dec->register_module("transpconvs", nn::ModuleList());
  auto seg_layers = dec->register_module("seg_layers", nn::ModuleList());
  // The reference's decoder stage s (s = 1..n-1, in computation order) is
  // level i = n-1-s here: it consumes skip i.
  for (int s = 1; s < n; ++s) {
    const int i = n - 1 - s;
    const int64_t below = a.features[n - s];
    const int64_t skip = a.features[i];
    nn::AnyModule up = TransposedConv(a.dims, below, skip, ToInts(a.strides[n - s]), a.conv_bias);
    transpconvs->push_back(up.ptr());
    // Both classes decode with plain StackedConvBlocks (UNetDecoder).
    StackedConvs stage(a, a.decoder_convs[s - 1], 2 * skip, skip, ToInts(a.kernel_sizes[i]),
                       Ints(static_cast<size_t>(a.dims), 1));
    stages->push_back(stage);
    nn::AnyModule head = Conv(a.dims, skip, c.num_classes, Ints(static_cast<size_t>(a.dims), 1),
                              Ints(static_cast<size_t>(a.dims), 1), /*bias=*/true);
    seg_layers->push_back(head.ptr());
    // The upsampling and the first conv block on the upsampled tensor and
    // the skip concatenated (lean: on the two as they are).
    std::vector<ConvNormAct> convs = stage->blocks();
    auto first_block = [up, first = convs[0], lean](const std::vector<torch::Tensor>& x) mutable {
      torch::Tensor upsampled =
          lean ? Upsample(up, x[0]) : up.forward(x[0]);  // (N, F[i], S / scale[i])
      if (lean) return first->ForwardConcat({upsampled, x[1]}, /*free_first=*/0);
      return first->forward(torch::cat({upsampled, x[1]}, 1));  // (N, F[i], S / scale[i])
    };
    Level level{{up.ptr().get(), stage.ptr().get()},
                [first_block, convs](const std::vector<torch::Tensor>& x) mutable {
                  torch::Tensor h = first_block(x);
                  for (size_t b = 1; b < convs.size(); ++b) h = convs[b]->forward(h);
                  return h;  // (N, F[i], S / scale[i])
                }};
    // Blocks: the upsampling and concatenation with the first conv block, then
    // each further conv block.
    level.blocks.push_back({{up.ptr().get(), convs[0].ptr().get()}, first_block});
    for (size_t b = 1; b < convs.size(); ++b) level.blocks.push_back(BlockOf(convs[b]));
    Level out{{head.ptr().get()},
              [head](const std::vector<torch::Tensor>& x) mutable { return head.forward(x[0]); }};
    dec->SetLevel(i, std::move(level), std::move(out));
  }
  HeInit(*dec);
  SetLean(dec, c);
}

std::vector<std::pair<std::string, std::string>> NnunetStateDictAliases(
    const ModelConfig& c, const std::vector<std::string>& names) {
  std::vector<std::pair<std::string, std::string>> out;
  const bool has_norm = c.nnunet.norm != "none";
  auto all_modules = [&](const std::string& name) -> std::string {
    // X.conv.P -> X.all_modules.0.P and X.norm.P -> X.all_modules.1.P
    for (const auto& [attr, index] :
         {std::pair<std::string, std::string>{".conv.", ".all_modules.0."},
          {".norm.", ".all_modules.1."}}) {
      const size_t at = name.rfind(attr);
      if (at == std::string::npos || name.find('.', at + attr.size()) != std::string::npos)
        continue;
      if (attr == ".norm." && !has_norm) continue;
      return name.substr(0, at) + index + name.substr(at + attr.size());
    }
    return "";
  };
  for (const std::string& name : names) {
    const std::string alias = all_modules(name);
    if (!alias.empty()) out.emplace_back(alias, name);
    if (name.rfind("encoder.", 0) == 0) {
      out.emplace_back("decoder." + name, name);
      if (!alias.empty()) out.emplace_back("decoder." + alias, name);
    }
  }
  return out;
}

}  // namespace up
