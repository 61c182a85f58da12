// See lean_block.h.
#include "common/model/lean_block.h"

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

// The dimensions of a (N, C, *S) tensor of `dim` dimensions from `first` on,
// the channels' left out: 0 gives the batch and the voxels, 2 the voxels.
std::vector<int64_t> DimsButChannels(int64_t dim, int64_t first) {
  std::vector<int64_t> dims;
  for (int64_t d = first; d < dim; ++d)
    if (d != 1) dims.push_back(d);
  return dims;
}

struct ConcatConvFn : torch::autograd::Function<ConcatConvFn> {
  // `biases`: the bias, or none (an undefined tensor cannot be an input).
  static torch::Tensor forward(AutogradContext* ctx, at::TensorList parts, torch::Tensor weight,
                               at::TensorList biases, std::vector<int64_t> stride,
                               std::vector<int64_t> padding, std::vector<int64_t> dilation,
                               int64_t free_first) {
    const std::vector<int64_t> no_output_padding(stride.size(), 0);
    const torch::Tensor bias = biases.empty() ? torch::Tensor() : biases[0];
    torch::Tensor out;  // (N, out, *S')
    int64_t first_channel = 0;
    for (size_t k = 0; k < parts.size(); ++k) {
      const int64_t channels = parts[k].size(1);
      const torch::Tensor w = weight.narrow(1, first_channel, channels);  // (out, C_k, *kernel)
      first_channel += channels;
      torch::Tensor y = at::convolution(parts[k], w, k == 0 ? bias : torch::Tensor(), stride,
                                        padding, dilation, false, no_output_padding, 1);
      if (out.defined()) {
        out.add_(y);
      } else {
        out = std::move(y);
      }
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

// How a norm groups its statistics: per channel over the batch (BatchNorm
// training), per sample and channel (InstanceNorm), per sample and group of
// channels (GroupNorm).
enum class StatGroups : int64_t { kChannel, kSampleChannel, kSampleGroup };

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
    const torch::Tensor gamma = affine ? saved[1] : torch::Tensor();  // (C)
    const torch::Tensor beta = affine ? saved[2] : torch::Tensor();   // (C)
    const torch::Tensor grad_y = grad_out[0];                         // (N, C, *S)
    const auto groups = static_cast<StatGroups>(ctx->saved_data["groups"].toInt());
    const int64_t num_groups = ctx->saved_data["num_groups"].toInt();
    const double eps = ctx->saved_data["eps"].toDouble();
    const bool act = ctx->saved_data["act"].toBool();
    const double slope = ctx->saved_data["slope"].toDouble();

    const int64_t n = x.size(0), c = x.size(1);
    torch::Tensor grad_x = torch::empty_like(x, at::MemoryFormat::Contiguous);  // (N, C, *S)
    torch::Tensor grad_gamma = affine ? torch::zeros_like(gamma) : torch::Tensor();
    torch::Tensor grad_beta = affine ? torch::zeros_like(beta) : torch::Tensor();
    const std::vector<int64_t> but_channels = DimsButChannels(x.dim(), 0);
    std::vector<int64_t> channel_shape(static_cast<size_t>(x.dim()), 1);

    // Samples [n0, n0 + nn), channels [c0, c0 + cn): whole statistics
    // groups, each normalised over `stat_dims` (none: the whole box is one
    // group).
    auto boxes = [&](int64_t n0, int64_t nn, int64_t c0, int64_t cn,
                     at::OptionalIntArrayRef stat_dims) {
      auto box = [&](const torch::Tensor& t) { return t.narrow(0, n0, nn).narrow(1, c0, cn); };
      const torch::Tensor z = box(x);
      auto [var, mean] = at::var_mean(z, stat_dims, /*correction=*/0, /*keepdim=*/true);
      const torch::Tensor invstd = (var + eps).rsqrt();
      const torch::Tensor xhat = (z - mean) * invstd;
      channel_shape[1] = cn;
      const torch::Tensor gam =
          affine ? gamma.narrow(0, c0, cn).view(channel_shape) : torch::Tensor();
      torch::Tensor g = box(grad_y);
      if (act) {
        const torch::Tensor positive =
            (affine ? xhat * gam + beta.narrow(0, c0, cn).view(channel_shape) : xhat) > 0;
        g = slope == 0.0 ? g * positive : at::where(positive, g, g * slope);
      }
      if (affine) {
        grad_gamma.narrow(0, c0, cn).add_((g * xhat).sum(but_channels));
        grad_beta.narrow(0, c0, cn).add_(g.sum(but_channels));
      }
      const torch::Tensor dxhat = affine ? g * gam : g;
      const torch::Tensor s1 = dxhat.mean(stat_dims, /*keepdim=*/true);
      const torch::Tensor s2 = (dxhat * xhat).mean(stat_dims, /*keepdim=*/true);
      box(grad_x).copy_((dxhat - s1 - xhat * s2) * invstd);
    };
    // Channels a box takes: a 32nd of x at most, or 2^18 elements where
    // that is more (a whole group at least), so that the scratch stays small
    // beside x and the kernels few on small tensors.
    const int64_t per_sample = x.numel() / std::max<int64_t>(n, 1);
    auto channels_per_box = [&](int64_t elements_per_channel) {
      const int64_t most = std::max<int64_t>(x.numel() / 32, int64_t{1} << 18);
      return std::max<int64_t>(1, most / std::max<int64_t>(elements_per_channel, 1));
    };
    if (groups == StatGroups::kChannel) {
      const std::vector<int64_t>& dims = but_channels;  // per channel over batch and voxels
      const int64_t k = channels_per_box(n * (per_sample / std::max<int64_t>(c, 1)));
      for (int64_t c0 = 0; c0 < c; c0 += k) boxes(0, n, c0, std::min(k, c - c0), dims);
    } else if (groups == StatGroups::kSampleChannel) {
      const std::vector<int64_t> dims = DimsButChannels(x.dim(), 2);  // per sample and channel
      const int64_t k = channels_per_box(per_sample / std::max<int64_t>(c, 1));
      for (int64_t s = 0; s < n; ++s)
        for (int64_t c0 = 0; c0 < c; c0 += k) boxes(s, 1, c0, std::min(k, c - c0), dims);
    } else {
      const int64_t per = c / num_groups;  // a group's channels, one box each
      for (int64_t s = 0; s < n; ++s)
        for (int64_t c0 = 0; c0 < c; c0 += per) boxes(s, 1, c0, per, at::OptionalIntArrayRef());
    }
    // x, weight and bias (if any), norm, act
    variable_list grads{grad_x};
    if (affine) {
      grads.push_back(grad_gamma);
      grads.push_back(grad_beta);
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

}  // namespace up
