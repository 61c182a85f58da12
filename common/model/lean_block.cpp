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

}  // namespace up
