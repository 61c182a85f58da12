// U-Net layers; see unet.h. The 2-D/3-D choice is made once per layer by the
// Make* factories below, so the architecture is written once.
#include "common/model/unet.h"

#include "common/layout/pipeline_layout.h"
#include "common/model/bundle_unet.h"
#include "common/model/lean_block.h"
#include "common/model/level_checkpoint.h"
#include "common/model/nnunet_unet.h"
#include "common/model/precision.h"

#include <algorithm>
#include <functional>
#include <set>

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
  if (c.norm == Norm::kGroup)
    return nn::AnyModule(nn::GroupNorm(nn::GroupNormOptions(c.groups, channels)));
  if (c.norm == Norm::kInstance) {
    if (c.dims == 2)
      return nn::AnyModule(nn::InstanceNorm2d(nn::InstanceNorm2dOptions(channels).affine(true)));
    return nn::AnyModule(nn::InstanceNorm3d(nn::InstanceNorm3dOptions(channels).affine(true)));
  }
  if (c.dims == 2) return nn::AnyModule(nn::BatchNorm2d(nn::BatchNorm2dOptions(channels)));
  return nn::AnyModule(nn::BatchNorm3d(nn::BatchNorm3dOptions(channels)));
}

// [3x3 conv (no bias), norm, ReLU] x 2, and each conv-norm-ReLU's modules
// apart for its block (the Sequential holds the same modules).
struct DoubleConv {
  nn::Sequential seq;
  std::vector<nn::AnyModule> first, second;  // conv, norm, ReLU
};
DoubleConv MakeDoubleConv(const ModelConfig& c, int in, int out) {
  DoubleConv d;
  d.first = {MakeConv(c.dims, in, out, 3, /*bias=*/false), MakeNorm(c, out),
             nn::AnyModule(nn::ReLU(nn::ReLUOptions(/*inplace=*/true)))};
  d.second = {MakeConv(c.dims, out, out, 3, /*bias=*/false), MakeNorm(c, out),
              nn::AnyModule(nn::ReLU(nn::ReLUOptions(/*inplace=*/true)))};
  d.seq->push_back("conv1", d.first[0]);
  d.seq->push_back("norm1", d.first[1]);
  d.seq->push_back("relu1", d.first[2]);
  d.seq->push_back("conv2", d.second[0]);
  d.seq->push_back("norm2", d.second[1]);
  d.seq->push_back("relu2", d.second[2]);
  return d;
}

// A block of modules run in order on `x` (what Sequential::forward does).
torch::Tensor RunChain(std::vector<nn::AnyModule>& chain, torch::Tensor x) {
  for (nn::AnyModule& m : chain) x = m.forward(x);
  return x;
}

// A conv-norm-ReLU block's norm and ReLU on its conv's output `h`: as
// written, or lean (NormAct: its graph does not save the norm's output).
torch::Tensor NormRelu(std::vector<nn::AnyModule>& chain, torch::Tensor h, bool lean) {
  if (lean) return NormAct(*chain[1].ptr(), h, Activation{true, 0.0});
  return chain[2].forward(chain[1].forward(h));
}

// A conv-norm-ReLU block on `x`.
torch::Tensor RunBlock(std::vector<nn::AnyModule>& chain, torch::Tensor x, bool lean) {
  if (!lean) return RunChain(chain, x);
  return NormRelu(chain, chain[0].forward(x), lean);
}

std::vector<torch::nn::Module*> ModulePointers(const std::vector<nn::AnyModule>& chain) {
  std::vector<torch::nn::Module*> out;
  for (const nn::AnyModule& m : chain) out.push_back(m.ptr().get());
  return out;
}

uint64_t Mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// A second handle on `x` for the next level (a view, no copy). The gradient
// its consumers give it reaches `x` summed as one, so a tensor that crosses
// a level boundary gets at most two contributions (its skip's and the next
// level's), whose sum does not depend on the order: the model computes the
// same bits however the pipeline cuts it into parts, and when the next level
// uses its input twice (a residual block: the strided conv and the pooled
// skip) as well.
torch::Tensor Fork(const torch::Tensor& x) { return x.view_as(x); }

// `level` on `in`, checkpointed as `unit` says. Blocks chain: each block's
// input is the one before's output, and only that is kept.
torch::Tensor RunLevel(const Level& level, const std::vector<torch::Tensor>& in,
                       CheckpointUnit unit, ActivationOffload* offload) {
  if (unit == CheckpointUnit::kNone) return level.run(in);
  if (unit == CheckpointUnit::kLevel || level.blocks.empty())
    return CheckpointedLevel(level.modules, level.run, in, offload);
  torch::Tensor h;
  for (size_t b = 0; b < level.blocks.size(); ++b) {
    const Level& block = level.blocks[b];
    h = CheckpointedLevel(block.modules, block.run, b == 0 ? in : std::vector<torch::Tensor>{h},
                          offload);
  }
  return h;
}

}  // namespace

CheckpointUnit CheckpointUnitOf(Checkpointing setting) {
  switch (setting) {
    case Checkpointing::kOff:
      return CheckpointUnit::kNone;
    case Checkpointing::kLevels:
      return CheckpointUnit::kLevel;
    case Checkpointing::kBlocks:
      return CheckpointUnit::kBlock;
  }
  return CheckpointUnit::kNone;
}

CheckpointUnit CheckpointUnitOf(RecomputeUnit setting) {
  return setting == RecomputeUnit::kBlock ? CheckpointUnit::kBlock : CheckpointUnit::kLevel;
}

uint64_t EncoderInitSeed(uint64_t seed) { return Mix(seed * 2 + 0) >> 1; }
uint64_t DecoderInitSeed(uint64_t seed) { return Mix(seed * 2 + 1) >> 1; }

BoundarySpec BoundaryShapes(const ModelConfig& model, const std::vector<int>& size, int64_t n) {
  BoundarySpec spec;
  const LevelGeometry g = Geometry(model);
  auto shape_at = [&](int level, int64_t channels) {
    std::vector<int64_t> shape{n, channels};
    for (size_t d = 0; d < size.size(); ++d) shape.push_back(size[d] / g.scale[level][d]);
    return shape;
  };
  spec.names.push_back("bottleneck");
  spec.shapes.push_back(shape_at(g.levels(), g.bottleneck_channels));
  for (int i = 0; i < g.levels(); ++i) {
    spec.names.push_back("skip" + std::to_string(i));
    spec.shapes.push_back(shape_at(i, g.skip_channels[i]));
  }
  return spec;
}

std::string BoundarySignature(const Config& config) {
  const PipelineLayout layout = ResolveLayout(config);
  const std::string dtype = config.train.precision == Precision::kBf16 ? ":autocast-bf16" : ":f32";
  std::string out;
  for (const StageChannel& ch : layout.channels) {
    if (!layout.two_stage())
      out += (out.empty() ? "" : " ") + std::to_string(ch.from) + ">" + std::to_string(ch.to);
    for (const WireTensor& t : ch.tensors) {
      out += (out.empty() ? "" : " ") + t.name + ":";
      for (size_t d = 0; d < t.shape.size(); ++d)
        out += (d ? "x" : "") + std::to_string(t.shape[d]);
      out += dtype;
    }
  }
  return out;
}

namespace {

// The classic U-Net's halves. Modules are created (and the seeded generator
// consumed) in the order the digests of earlier versions fixed.
void BuildClassicEncoder(UNetEncoderImpl* enc, const ModelConfig& c) {
  const bool lean = c.memory == ModelMemory::kLean;
  const int dims = c.dims;
  int in = c.in_channels;
  auto pool = [dims](const torch::Tensor& x) {
    InputDtypeScope as_on_cuda;  // CPU autocast would pool 3-D in fp32
    return dims == 2 ? torch::max_pool2d(x, 2) : torch::max_pool3d(x, 2);
  };
  auto add = [&](const std::string& name, int out, bool pooled) {
    DoubleConv dc = MakeDoubleConv(c, in, out);
    nn::Sequential conv = enc->register_module(name, dc.seq);
    auto first = [first = dc.first, pooled, pool,
                  lean](const std::vector<torch::Tensor>& x) mutable {
      return RunBlock(first, pooled ? pool(x[0]) : x[0], lean);
    };
    auto second = [second = dc.second, lean](const std::vector<torch::Tensor>& x) mutable {
      return RunBlock(second, x[0], lean);
    };
    Level level{{conv.ptr().get()}, [first, second](const std::vector<torch::Tensor>& x) mutable {
                  return second({first(x)});  // (N, F, S / 2^i)
                }};
    // Blocks: [pool,] conv1, norm1, ReLU; then conv2, norm2, ReLU.
    level.blocks.push_back({ModulePointers(dc.first), first});
    level.blocks.push_back({ModulePointers(dc.second), second});
    enc->AddLevel(std::move(level));
    in = out;
  };
  for (size_t i = 0; i < c.features.size(); ++i)
    add("down" + std::to_string(i), c.features[i], i > 0);
  add("bottleneck", 2 * in, /*pooled=*/true);  // (N, 2*F[L-1], S / 2^L)
}

void BuildClassicDecoder(UNetDecoderImpl* dec, const ModelConfig& c) {
  const bool lean = c.memory == ModelMemory::kLean;
  const int levels = static_cast<int>(c.features.size());
  int in = 2 * c.features.back();
  std::vector<std::pair<nn::AnyModule, DoubleConv>> parts(static_cast<size_t>(levels));
  for (int i = levels - 1; i >= 0; --i) {
    const std::string idx = std::to_string(i);
    nn::AnyModule up = MakeUpConv(c.dims, in, c.features[i]);
    dec->register_module("up" + idx, up.ptr());
    DoubleConv dc = MakeDoubleConv(c, 2 * c.features[i], c.features[i]);
    dec->register_module("conv" + idx, dc.seq);
    parts[i] = {up, dc};
    in = c.features[i];
  }
  nn::AnyModule head = MakeConv(c.dims, c.features[0], c.num_classes, 1, /*bias=*/true);
  dec->register_module("head", head.ptr());
  for (int i = levels - 1; i >= 0; --i) {
    auto [up, dc] = parts[i];
    nn::Sequential conv = dc.seq;
    // The first block: the upsampling, then conv1 on the skip and the
    // upsampled tensor concatenated (lean: on the two as they are), norm1, ReLU.
    auto first_block = [up, chain = dc.first, lean](const std::vector<torch::Tensor>& x) mutable {
      torch::Tensor upsampled = lean ? Upsample(up, x[0]) : up.forward(x[0]);  // (N, F[i], S / 2^i)
      if (!lean) return RunChain(chain, torch::cat({x[1], upsampled}, 1));     // (N, F[i], S / 2^i)
      return NormRelu(chain, ConcatConv(*chain[0].ptr(), {x[1], upsampled}, /*free_first=*/1),
                      lean);  // (N, F[i], S / 2^i)
    };
    auto second_block = [chain = dc.second, lean](const std::vector<torch::Tensor>& x) mutable {
      return RunBlock(chain, x[0], lean);  // (N, F[i], S / 2^i)
    };
    Level level{{up.ptr().get(), conv.ptr().get()},
                [first_block, second_block](const std::vector<torch::Tensor>& x) mutable {
                  return second_block({first_block(x)});  // (N, F[i], S / 2^i)
                }};
    // Blocks: upsampling, concatenation, conv1, norm1, ReLU; then conv2, norm2, ReLU.
    std::vector<torch::nn::Module*> first = ModulePointers(dc.first);
    first.insert(first.begin(), up.ptr().get());
    level.blocks.push_back({first, first_block});
    level.blocks.push_back({ModulePointers(dc.second), second_block});
    Level out;
    if (i == 0)
      out = {{head.ptr().get()},
             [head](const std::vector<torch::Tensor>& x) mutable { return head.forward(x[0]); }};
    dec->SetLevel(i, std::move(level), std::move(out));
  }
}

}  // namespace

UNetEncoderImpl::UNetEncoderImpl(const ModelConfig& c, uint64_t seed) {
  torch::manual_seed(seed);
  if (c.kind == ModelKind::kTorchscript) {
    BuildBundleEncoder(this, c);
  } else if (c.kind == ModelKind::kNnunet) {
    BuildNnunetEncoder(this, c);
  } else {
    BuildClassicEncoder(this, c);
  }
}

Boundary UNetEncoderImpl::forward(const torch::Tensor& x) {
  Boundary out;
  torch::Tensor h = x;  // (N, C, *S)
  for (size_t i = 0; i < levels_.size(); ++i) {
    const Level& level = levels_[i];
    const torch::Tensor in = Fork(h);
    h = RunLevel(level, {in}, checkpointing_, offload_);
    if (i + 1 < levels_.size()) out.skips.push_back(h);  // (N, F[i], S / scale[i])
  }
  out.bottleneck = h;  // (N, F_bottleneck, S / scale[L])
  return out;
}

namespace {

// Unregisters every child subtree of `m` that holds none of `keep`, after
// releasing its tensors (a ModuleList still holds its children).
void PruneTo(torch::nn::Module& m, const std::set<const torch::nn::Module*>& keep) {
  std::function<bool(const torch::nn::Module&)> holds = [&](const torch::nn::Module& x) {
    if (keep.count(&x)) return true;
    for (const auto& c : x.children())
      if (holds(*c)) return true;
    return false;
  };
  std::vector<std::string> drop;
  for (const auto& child : m.named_children()) {
    if (keep.count(child.value().get())) continue;
    if (holds(*child.value())) {
      PruneTo(*child.value(), keep);
      continue;
    }
    torch::NoGradGuard no_grad;
    for (torch::Tensor t : child.value()->parameters()) t.set_data(torch::empty({0}));
    for (torch::Tensor t : child.value()->buffers()) t.set_data(torch::empty({0}));
    drop.push_back(child.key());
  }
  for (const std::string& name : drop) m.unregister_module(name);
}

// Prunes `root` to `keep` and returns where each remaining parameter stood
// in the whole module's parameters(); `whole`: how many it had.
std::vector<int> KeepModules(torch::nn::Module& root,
                             const std::set<const torch::nn::Module*>& keep, int* whole) {
  std::map<const c10::TensorImpl*, int> position;
  int i = 0;
  for (const torch::Tensor& p : root.parameters()) position[p.unsafeGetTensorImpl()] = i++;
  *whole = i;
  PruneTo(root, keep);
  std::vector<int> out;
  for (const torch::Tensor& p : root.parameters())
    out.push_back(position.at(p.unsafeGetTensorImpl()));
  return out;
}

std::set<const torch::nn::Module*> ModulesOf(const std::vector<Level>& levels, int lo, int hi) {
  std::set<const torch::nn::Module*> out;
  for (int i = lo; i <= hi; ++i)
    for (const torch::nn::Module* m : levels[static_cast<size_t>(i)].modules) out.insert(m);
  return out;
}

}  // namespace

void UNetEncoderImpl::KeepLevels(int lo, int hi) {
  const int top = static_cast<int>(levels_.size()) - 1;
  if (lo < 0 || hi > top || lo > hi) {
    throw std::invalid_argument("encoder levels " + std::to_string(lo) + ".." + std::to_string(hi) +
                                " of 0.." + std::to_string(top));
  }
  parameter_positions_ = KeepModules(*this, ModulesOf(levels_, lo, hi), &whole_parameters_);
  for (int i = 0; i <= top; ++i)
    if (i < lo || i > hi) levels_[static_cast<size_t>(i)] = Level{};
  lo_ = lo;
  hi_ = hi;
}

PartTensors UNetEncoderImpl::ForwardPart(const torch::Tensor& x) {
  const int top = static_cast<int>(levels_.size()) - 1;
  const int hi = hi_ < 0 ? top : hi_;
  PartTensors out;
  torch::Tensor h = mover_ ? mover_(x) : x;  // (N, C, *S / scale[lo])
  for (int i = lo_; i <= hi; ++i) {
    h = RunLevel(levels_[static_cast<size_t>(i)], {Fork(h)}, checkpointing_,
                 offload_);  // (N, F[i], S / scale[i])
    out[i == top ? std::string("bottleneck") : "skip" + std::to_string(i)] = h;
  }
  return out;
}

void UNetDecoderImpl::KeepLevels(int lo, int hi) {
  const int top = static_cast<int>(levels_.size()) - 1;
  if (lo < 0 || hi > top || lo > hi) {
    throw std::invalid_argument("decoder levels " + std::to_string(lo) + ".." + std::to_string(hi) +
                                " of 0.." + std::to_string(top));
  }
  std::set<const torch::nn::Module*> keep = ModulesOf(levels_, lo, hi);
  for (const torch::nn::Module* m : ModulesOf(heads_, lo, hi)) keep.insert(m);
  parameter_positions_ = KeepModules(*this, keep, &whole_parameters_);
  for (int i = 0; i <= top; ++i) {
    if (i >= lo && i <= hi) continue;
    levels_[static_cast<size_t>(i)] = Level{};
    heads_[static_cast<size_t>(i)] = Level{};
  }
  lo_ = lo;
  hi_ = hi;
}

PartTensors UNetDecoderImpl::ForwardPart(const PartTensors& in) {
  const int top = static_cast<int>(levels_.size()) - 1;
  const int hi = hi_ < 0 ? top : hi_;
  auto input = [&](const std::string& name) {
    auto it = in.find(name);
    if (it == in.end()) throw std::invalid_argument("decoder part: no input '" + name + "'");
    return mover_ ? mover_(it->second) : it->second;  // on the device as its level starts
  };
  PartTensors out;
  torch::Tensor h = input(hi == top ? std::string("bottleneck") : "up" + std::to_string(hi + 1));
  for (int i = hi; i >= lo_; --i) {
    const std::string idx = std::to_string(i);
    h = RunLevel(levels_[static_cast<size_t>(i)], {Fork(h), Fork(input("skip" + idx))},
                 checkpointing_, offload_);  // (N, F[i], S / scale[i])
    if (i > 0) out["up" + idx] = h;
    if (heads_[static_cast<size_t>(i)].run && (i == 0 || deep_supervision_))
      out["logits" + idx] = heads_[static_cast<size_t>(i)].run({h});  // (N, K, S / scale[i])
  }
  return out;
}

UNetDecoderImpl::UNetDecoderImpl(const ModelConfig& c, uint64_t seed, bool deep_supervision)
    : deep_supervision_(deep_supervision) {
  torch::manual_seed(seed);
  const size_t levels = static_cast<size_t>(Geometry(c).levels());
  levels_.resize(levels);
  heads_.resize(levels);
  if (c.kind == ModelKind::kTorchscript) {
    BuildBundleDecoder(this, c);
  } else if (c.kind == ModelKind::kNnunet) {
    BuildNnunetDecoder(this, c);
  } else {
    BuildClassicDecoder(this, c);
  }
}

void UNetDecoderImpl::SetLevel(int i, Level level, Level head) {
  levels_.at(static_cast<size_t>(i)) = std::move(level);
  heads_.at(static_cast<size_t>(i)) = std::move(head);
}

std::vector<torch::Tensor> UNetDecoderImpl::forward(const Boundary& b) {
  std::vector<torch::Tensor> outputs(levels_.size());
  torch::Tensor h = b.bottleneck;  // (N, F_bottleneck, S / scale[L])
  for (int i = static_cast<int>(levels_.size()) - 1; i >= 0; --i) {
    const Level& level = levels_[i];
    const std::vector<torch::Tensor> in{Fork(h), Fork(b.skips[i])};
    h = RunLevel(level, in, checkpointing_, offload_);  // (N, F[i], S / scale[i])
    if (heads_[i].run && (i == 0 || deep_supervision_)) outputs[i] = heads_[i].run({h});
  }
  if (!deep_supervision_) outputs.resize(1);
  return outputs;  // outputs[i]: (N, num_classes, S / scale[i])
}

UNetEncoder MakeEncoder(const Config& config) {
  return UNetEncoder(config.model, EncoderInitSeed(config.train.seed));
}

UNetDecoder MakeDecoder(const Config& config) {
  return UNetDecoder(config.model, DecoderInitSeed(config.train.seed),
                     config.train.deep_supervision);
}

UNetEncoder MakeEncoderPart(const Config& config, int lo, int hi) {
  UNetEncoder part = MakeEncoder(config);
  part->KeepLevels(lo, hi);
  return part;
}

UNetDecoder MakeDecoderPart(const Config& config, int lo, int hi) {
  UNetDecoder part = MakeDecoder(config);
  part->KeepLevels(lo, hi);
  return part;
}

UNetImpl::UNetImpl(const ModelConfig& c, uint64_t seed, bool deep_supervision) {
  encoder = register_module("encoder", UNetEncoder(c, EncoderInitSeed(seed)));
  decoder = register_module("decoder", UNetDecoder(c, DecoderInitSeed(seed), deep_supervision));
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
