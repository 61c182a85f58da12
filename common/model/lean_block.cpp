// See lean_block.h.
#include "common/model/lean_block.h"

#include "common/model/norm_act_backward.h"

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <string>

namespace up {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// What a Conv2d or Conv3d module convolves with.
struct ConvArgs {
  torch::Tensor weight;  // (out, in, *kernel)
  torch::Tensor bias;    // (out) or undefined
  std::vector<int64_t> stride, padding, dilation;
};

template <typename Impl, size_t D>
bool ArgsOf(torch::nn::Module& m, ConvArgs* out) {
  auto* conv = dynamic_cast<Impl*>(&m);
  if (conv == nullptr) return false;
  const auto* padding = std::get_if<torch::ExpandingArray<D>>(&conv->options.padding());
  if (padding == nullptr || conv->options.groups() != 1 ||
      !std::holds_alternative<torch::enumtype::kZeros>(conv->options.padding_mode()))
    throw std::invalid_argument(
        "a lean block's concatenation convolution takes one group, zero padding given as sizes");
  out->weight = conv->weight;
  out->bias = conv->bias;
  auto vec = [](const torch::ExpandingArray<D>& a) {
    return std::vector<int64_t>(a->begin(), a->end());
  };
  out->stride = vec(conv->options.stride());
  out->padding = vec(*padding);
  out->dilation = vec(conv->options.dilation());
  return true;
}

ConvArgs ArgsOf(torch::nn::Module& m) {
  ConvArgs args;
  if (ArgsOf<torch::nn::Conv2dImpl, 2>(m, &args) || ArgsOf<torch::nn::Conv3dImpl, 3>(m, &args))
    return args;
  throw std::invalid_argument(
      "a lean block's concatenation convolution must be a Conv2d or Conv3d, "
      "not " +
      m.name());
}

std::string PartKey(size_t k) { return "part" + std::to_string(k); }

// A part's convolution is taken in slabs of the first spatial axis when it
// keeps its size there (stride 1, no dilation, padding (k - 1) / 2) and the
// axis is long: a quarter of the axis at a time, at least kMinSlabRows rows.
// Each slab convolves its rows with a halo of `padding` rows either side and
// keeps its own rows, so the result is the same convolution; what the
// kernel holds at once (its copies of the input in its own layout, its
// output) is a slab's, not the whole part's. A halo is convolved twice:
// 2 * padding rows a slab, about 4% more work at 48 rows. Only a part of
// kMinSlabElements or more: what a smaller one holds does not matter. On a
// CPU a slab goes to oneDNN's convolution directly, as the whole part
// would: ATen takes a small convolution (a thin slab can be one) to its
// im2col kernel, which holds 27 copies of its input.
constexpr int64_t kSlabs = 4;
constexpr int64_t kMinSlabRows = 16;
constexpr int64_t kMinSlabElements = int64_t{1} << 21;

bool BySlabs(const torch::Tensor& x, const torch::Tensor& w, const std::vector<int64_t>& stride,
             const std::vector<int64_t>& padding, const std::vector<int64_t>& dilation) {
  if (x.dim() < 3 || x.size(2) < 2 * kMinSlabRows || x.numel() < kMinSlabElements) return false;
  for (size_t d = 0; d < stride.size(); ++d)
    if (stride[d] != 1 || dilation[d] != 1 ||
        w.size(2 + static_cast<int64_t>(d)) != 2 * padding[d] + 1)
      return false;
  return true;
}

// out += conv(x, w) + bias, or out = that where `out` is undefined.
//   x: (N, C_k, *S), w: (out, C_k, *kernel), out: (N, out, *S')
void ConvolveInto(torch::Tensor* out, const torch::Tensor& x, const torch::Tensor& w,
                  const torch::Tensor& bias, const std::vector<int64_t>& stride,
                  const std::vector<int64_t>& padding, const std::vector<int64_t>& dilation) {
  const std::vector<int64_t> no_output_padding(stride.size(), 0);
  if (!BySlabs(x, w, stride, padding, dilation)) {
    torch::Tensor y =
        at::convolution(x, w, bias, stride, padding, dilation, false, no_output_padding, 1);
    if (out->defined()) {
      out->add_(y);
    } else {
      *out = std::move(y);
    }
    return;
  }
  const bool first = !out->defined();
  if (first) {
    std::vector<int64_t> sizes = x.sizes().vec();
    sizes[1] = w.size(0);
    *out = at::empty(sizes, x.options().memory_format(x.suggest_memory_format()));
  }
  const int64_t rows_total = x.size(2);
  const int64_t rows = std::max(kMinSlabRows, (rows_total + kSlabs - 1) / kSlabs);
  const int64_t halo = padding[0];
  const bool onednn = x.is_cpu() && x.scalar_type() == torch::kFloat && at::hasMKLDNN();
  const torch::Tensor kernel = onednn ? w.contiguous() : w;  // oneDNN takes a dense weight
  for (int64_t d0 = 0; d0 < rows_total; d0 += rows) {
    const int64_t d1 = std::min(rows_total, d0 + rows);
    const int64_t s0 = std::max<int64_t>(0, d0 - halo);
    const int64_t s1 = std::min(rows_total, d1 + halo);
    const torch::Tensor slab = x.narrow(2, s0, s1 - s0);  // (N, C_k, s1 - s0, ...)
    const torch::Tensor y = (onednn ? at::mkldnn_convolution(slab.contiguous(), kernel, bias,
                                                             padding, stride, dilation, 1)
                                    : at::convolution(slab, kernel, bias, stride, padding, dilation,
                                                      false, no_output_padding, 1))
                                .narrow(2, d0 - s0, d1 - d0);  // (N, out, d1 - d0, ...)
    torch::Tensor dst = out->narrow(2, d0, d1 - d0);
    if (first) {
      dst.copy_(y);
    } else {
      dst.add_(y);
    }
  }
}

struct ConcatConvFn : torch::autograd::Function<ConcatConvFn> {
  // `biases`: the bias, or none (an undefined tensor cannot be an input).
  static torch::Tensor forward(AutogradContext* ctx, at::TensorList parts, torch::Tensor weight,
                               at::TensorList biases, std::vector<int64_t> stride,
                               std::vector<int64_t> padding, std::vector<int64_t> dilation,
                               int64_t free_first) {
    const torch::Tensor bias = biases.empty() ? torch::Tensor() : biases[0];
    torch::Tensor out;  // (N, out, *S')
    int64_t first_channel = 0;
    for (size_t k = 0; k < parts.size(); ++k) {
      const int64_t channels = parts[k].size(1);
      const torch::Tensor w = weight.narrow(1, first_channel, channels);  // (out, C_k, *kernel)
      first_channel += channels;
      ConvolveInto(&out, parts[k], w, k == 0 ? bias : torch::Tensor(), stride, padding, dilation);
    }
    TORCH_CHECK(first_channel == weight.size(1), "ConcatConv: the parts have ", first_channel,
                " channels together, the convolution takes ", weight.size(1));
    // The parts in saved_data, not save_for_backward: the backward lets each
    // go as soon as its input gradient no longer needs it.
    for (size_t k = 0; k < parts.size(); ++k) ctx->saved_data[PartKey(k)] = parts[k];
    ctx->saved_data["parts"] = static_cast<int64_t>(parts.size());
    ctx->saved_data["bias"] = bias.defined();
    ctx->saved_data["stride"] = stride;
    ctx->saved_data["padding"] = padding;
    ctx->saved_data["dilation"] = dilation;
    ctx->saved_data["free_first"] = free_first;
    ctx->save_for_backward({weight});
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    const size_t n = static_cast<size_t>(ctx->saved_data["parts"].toInt());
    TORCH_CHECK(ctx->saved_data.count(PartKey(0)) == 1,
                "ConcatConv's backward ran twice; a lean block's graph is for one backward "
                "(no retain_graph)");
    torch::Tensor g = grad_out[0];  // (N, out, *S')
    const torch::Tensor weight = ctx->get_saved_variables()[0];
    const std::vector<int64_t> stride = ctx->saved_data["stride"].toIntVector();
    const std::vector<int64_t> padding = ctx->saved_data["padding"].toIntVector();
    const std::vector<int64_t> dilation = ctx->saved_data["dilation"].toIntVector();
    const std::vector<int64_t> no_output_padding(stride.size(), 0);
    const size_t free_first = static_cast<size_t>(ctx->saved_data["free_first"].toInt());

    // parts..., weight, bias (if any), stride, padding, dilation, free_first
    const bool bias = ctx->saved_data["bias"].toBool();
    variable_list grads(n + (bias ? 6 : 5));
    const bool weight_grad = ctx->needs_input_grad(n);
    torch::Tensor grad_weight = weight_grad ? torch::empty_like(weight) : torch::Tensor();
    if (bias && ctx->needs_input_grad(n + 1)) {
      grads[n + 1] = g.sum(DimsButChannels(g.dim(), 0));  // (out)
    }
    std::vector<int64_t> first_channel(n, 0);
    for (size_t k = 1; k < n; ++k)
      first_channel[k] = first_channel[k - 1] + ctx->saved_data[PartKey(k - 1)].toTensor().size(1);
    std::vector<size_t> order{free_first};
    for (size_t k = 0; k < n; ++k)
      if (k != free_first) order.push_back(k);
    for (size_t k : order) {
      torch::Tensor x = ctx->saved_data[PartKey(k)].toTensor();  // (N, C_k, *S)
      ctx->saved_data.erase(PartKey(k));
      const std::vector<int64_t> in_size = x.sizes().vec();
      const torch::Tensor w = weight.narrow(1, first_channel[k], in_size[1]);
      if (weight_grad) {
        auto r = at::convolution_backward(g, x, w, std::nullopt, stride, padding, dilation, false,
                                          no_output_padding, 1, {false, true, false});
        grad_weight.narrow(1, first_channel[k], in_size[1]).copy_(std::get<1>(r));
      }
      x = torch::Tensor();  // its values are not needed for its input gradient
      if (!ctx->needs_input_grad(k)) continue;
      // The input gradient is the transposed convolution of g; output_padding
      // gives back the rows a strided convolution did not reach.
      std::vector<int64_t> output_padding;
      for (size_t d = 0; d + 2 < in_size.size(); ++d) {
        const int64_t reached = (g.size(2 + d) - 1) * stride[d] - 2 * padding[d] +
                                dilation[d] * (w.size(2 + d) - 1) + 1;
        output_padding.push_back(in_size[2 + d] - reached);
      }
      grads[k] = at::convolution(g, w, torch::Tensor(), stride, padding, dilation, true,
                                 output_padding, 1);  // (N, C_k, *S)
    }
    grads[n] = grad_weight;
    return grads;
  }
};

// A ConvTranspose2d or ConvTranspose3d whose kernel is its stride (no
// padding, dilation or groups): each input voxel makes its own block of
// outputs, so rows of the input's first spatial axis make rows of the
// output's alone. Its weight, bias and stride; false for any other module.
template <typename Impl, size_t D>
bool UpsamplingArgs(torch::nn::Module& m, ConvArgs* out) {
  auto* up = dynamic_cast<Impl*>(&m);
  if (up == nullptr) return false;
  const auto& o = up->options;
  const auto* padding = std::get_if<torch::ExpandingArray<D>>(&o.padding());
  if (padding == nullptr || o.groups() != 1) return false;
  for (size_t d = 0; d < D; ++d)
    if ((*o.kernel_size())[d] != (*o.stride())[d] || (**padding)[d] != 0 ||
        (*o.output_padding())[d] != 0 || (*o.dilation())[d] != 1)
      return false;
  out->weight = up->weight;  // (in, out, *stride)
  out->bias = up->bias;
  out->stride = std::vector<int64_t>(o.stride()->begin(), o.stride()->end());
  return true;
}

struct UpsampleFn : torch::autograd::Function<UpsampleFn> {
  // x: (N, C, *S) -> (N, out, *S * stride), a slab of x's first spatial axis
  // at a time into the one output.
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight, at::TensorList biases,
                               std::vector<int64_t> stride) {
    const torch::Tensor bias = biases.empty() ? torch::Tensor() : biases[0];
    const std::vector<int64_t> zeros(stride.size(), 0), ones(stride.size(), 1);
    std::vector<int64_t> sizes = x.sizes().vec();
    sizes[1] = weight.size(1);
    for (size_t d = 0; d < stride.size(); ++d) sizes[2 + d] *= stride[d];
    torch::Tensor out = at::empty(sizes, x.options().memory_format(x.suggest_memory_format()));
    const int64_t rows_total = x.size(2);
    const int64_t rows = (rows_total + kSlabs - 1) / kSlabs;
    for (int64_t r0 = 0; r0 < rows_total; r0 += rows) {
      const int64_t r1 = std::min(rows_total, r0 + rows);
      out.narrow(2, r0 * stride[0], (r1 - r0) * stride[0])
          .copy_(at::convolution(x.narrow(2, r0, r1 - r0), weight, bias, stride, zeros, ones, true,
                                 zeros, 1));
    }
    ctx->saved_data["stride"] = stride;
    ctx->saved_data["bias"] = bias.defined();
    ctx->save_for_backward({x, weight});
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    const variable_list saved = ctx->get_saved_variables();
    const std::vector<int64_t> stride = ctx->saved_data["stride"].toIntVector();
    const std::vector<int64_t> zeros(stride.size(), 0), ones(stride.size(), 1);
    const bool bias = ctx->saved_data["bias"].toBool();
    const std::vector<int64_t> bias_sizes{saved[1].size(1)};
    std::optional<at::IntArrayRef> bias_arg;
    if (bias) bias_arg = bias_sizes;
    // What autograd's own backward of the transposed convolution computes.
    auto r = at::convolution_backward(
        grad_out[0], saved[0], saved[1], bias_arg, stride, zeros, ones, true, zeros, 1,
        {ctx->needs_input_grad(0), ctx->needs_input_grad(1), bias && ctx->needs_input_grad(2)});
    // x, weight, the bias (if any), stride
    variable_list grads{std::get<0>(r), std::get<1>(r)};
    if (bias) grads.push_back(std::get<2>(r));
    grads.push_back(torch::Tensor());
    return grads;
  }
};

struct NormArgs {
  StatGroups groups = StatGroups::kChannel;
  int64_t num_groups = 1;  // kSampleGroup
  double eps = 1e-5;
  torch::Tensor weight, bias;  // (C) each, or undefined (no affine)
  bool running = false;        // normalises with running statistics: not lean
  std::function<torch::Tensor(const torch::Tensor&)> forward;
};

// A BatchNorm or InstanceNorm module (their options and parameters are
// alike); `groups` says which.
template <typename Impl>
bool NormModuleArgs(torch::nn::Module& m, StatGroups groups, NormArgs* a) {
  auto* n = dynamic_cast<Impl*>(&m);
  if (n == nullptr) return false;
  a->groups = groups;
  a->eps = n->options.eps();
  a->weight = n->weight;
  a->bias = n->bias;
  a->running = !n->is_training() && n->options.track_running_stats();
  a->forward = [n](const torch::Tensor& x) { return n->forward(x); };
  return true;
}

NormArgs NormArgsOf(torch::nn::Module& m) {
  NormArgs a;
  constexpr StatGroups kBatch = StatGroups::kChannel, kInstance = StatGroups::kSampleChannel;
  if (NormModuleArgs<torch::nn::BatchNorm2dImpl>(m, kBatch, &a) ||
      NormModuleArgs<torch::nn::BatchNorm3dImpl>(m, kBatch, &a) ||
      NormModuleArgs<torch::nn::InstanceNorm2dImpl>(m, kInstance, &a) ||
      NormModuleArgs<torch::nn::InstanceNorm3dImpl>(m, kInstance, &a))
    return a;
  if (auto* n = dynamic_cast<torch::nn::GroupNormImpl*>(&m)) {
    a.groups = StatGroups::kSampleGroup;
    a.num_groups = n->options.num_groups();
    a.eps = n->options.eps();
    a.weight = n->weight;
    a.bias = n->bias;
    a.forward = [n](const torch::Tensor& x) { return n->forward(x); };
    return a;
  }
  throw std::invalid_argument(
      "a lean block's norm must be a BatchNorm, InstanceNorm or GroupNorm, "
      "not " +
      m.name());
}

torch::Tensor Activate(torch::Tensor y, Activation act) {
  if (!act.on) return y;
  return act.slope == 0.0 ? y.relu_() : torch::leaky_relu_(y, act.slope);
}

struct NormActFn : torch::autograd::Function<NormActFn> {
  // `affine`: the norm's weight and bias, or none.
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, at::TensorList affine,
                               const NormArgs* norm, Activation act) {
    torch::Tensor y = Activate(norm->forward(x), act);  // (N, C, *S)
    if (y.is_view()) {
      // InstanceNorm's output is a view of its reshaped batch norm's; a
      // custom Function's output must not be (the next in-place op would
      // replace this backward). The same memory, as a tensor of its own.
      torch::Tensor own = torch::empty({0}, y.options());
      own.set_(y.storage(), y.storage_offset(), y.sizes(), y.strides());
      y = own;
    }
    std::vector<torch::Tensor> saved{x};
    saved.insert(saved.end(), affine.begin(), affine.end());
    ctx->save_for_backward(saved);
    ctx->saved_data["groups"] = static_cast<int64_t>(norm->groups);
    ctx->saved_data["num_groups"] = norm->num_groups;
    ctx->saved_data["eps"] = norm->eps;
    ctx->saved_data["act"] = act.on;
    ctx->saved_data["slope"] = act.slope;
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor x = saved[0];  // (N, C, *S)
    const bool affine = saved.size() == 3;
    NormActSpec spec;
    spec.groups = static_cast<StatGroups>(ctx->saved_data["groups"].toInt());
    spec.num_groups = ctx->saved_data["num_groups"].toInt();
    spec.eps = ctx->saved_data["eps"].toDouble();
    spec.act = ctx->saved_data["act"].toBool();
    spec.slope = ctx->saved_data["slope"].toDouble();
    const NormActGrads g = NormActBackward(x, grad_out[0], affine ? saved[1] : torch::Tensor(),
                                           affine ? saved[2] : torch::Tensor(), spec);
    // x, weight and bias (if any), norm, act
    variable_list grads{g.x};
    if (affine) {
      grads.push_back(g.weight);
      grads.push_back(g.bias);
    }
    grads.push_back(torch::Tensor());
    grads.push_back(torch::Tensor());
    return grads;
  }
};

}  // namespace

torch::Tensor NormAct(torch::nn::Module& norm, const torch::Tensor& x, Activation act) {
  const NormArgs args = NormArgsOf(norm);
  if (!torch::GradMode::is_enabled() || args.running) return Activate(args.forward(x), act);
  std::vector<torch::Tensor> affine;
  if (args.weight.defined() && args.bias.defined()) affine = {args.weight, args.bias};
  return NormActFn::apply(x, at::TensorList(affine), &args, act);
}

torch::Tensor ConcatConv(torch::nn::Module& conv, const std::vector<torch::Tensor>& parts,
                         size_t free_first) {
  if (parts.empty() || free_first >= parts.size())
    throw std::invalid_argument("ConcatConv: free_first " + std::to_string(free_first) +
                                " is not one of the " + std::to_string(parts.size()) + " parts");
  const ConvArgs a = ArgsOf(conv);
  std::vector<torch::Tensor> biases;
  if (a.bias.defined()) biases.push_back(a.bias);
  return ConcatConvFn::apply(at::TensorList(parts), a.weight, at::TensorList(biases), a.stride,
                             a.padding, a.dilation, static_cast<int64_t>(free_first));
}

torch::Tensor Upsample(torch::nn::AnyModule& up, const torch::Tensor& x) {
  ConvArgs a;
  const bool blocks = UpsamplingArgs<torch::nn::ConvTranspose2dImpl, 2>(*up.ptr(), &a) ||
                      UpsamplingArgs<torch::nn::ConvTranspose3dImpl, 3>(*up.ptr(), &a);
  int64_t out_elements = blocks ? x.numel() / x.size(1) * a.weight.size(1) : 0;
  for (int64_t s : a.stride) out_elements *= s;
  if (!blocks || x.size(2) < kSlabs || out_elements < kMinSlabElements) return up.forward(x);
  std::vector<torch::Tensor> biases;
  if (a.bias.defined()) biases.push_back(a.bias);
  return UpsampleFn::apply(x, a.weight, at::TensorList(biases), a.stride);
}

}  // namespace up
