// See norm_act_backward.h. The formula, for one statistics group of M
// values x with mean m and invstd r, xhat = (x - m) r, y = xhat w + b
// (w = 1, b = 0 without affine), the activation's mask a = 1 where y > 0,
// else the slope:
//   g      = grad_y a                       (the gradient at the norm's output)
//   dxhat  = g w
//   grad_x = (dxhat - mean(dxhat) - xhat mean(dxhat xhat)) r
//   grad_w = sum of g xhat, grad_b = sum of g  (per channel, over the batch)
#include "common/model/norm_act_backward.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace up {
namespace {

bool FusedApplies(const at::Tensor& x, const at::Tensor& grad_y, const at::Tensor& weight) {
  return x.device().is_cpu() && grad_y.device().is_cpu() && x.scalar_type() == at::kFloat &&
         grad_y.scalar_type() == at::kFloat &&
         (!weight.defined() || weight.scalar_type() == at::kFloat) && x.is_contiguous();
}

// The loops below are SIMD loops (OpenMP's simd pragma under -fopenmp-simd:
// no threads, the float sums kept in vector lanes side by side; the mask a
// select under -fno-trapping-math, CMakeLists.txt) whose sums move into
// doubles every kChunk values.
constexpr int64_t kChunk = 4096;

// Sums of v - shift and of its squares over n values, into *sum and
// *squares. The shift (a value of the group) keeps the variance's
// subtraction from losing the digits a large mean would take.
void ShiftedSums(const float* v, int64_t n, float shift, double* sum, double* squares) {
  for (int64_t at = 0; at < n; at += kChunk) {
    const int64_t end = std::min(n, at + kChunk);
    float a = 0, q = 0;
#pragma omp simd reduction(+ : a, q)
    for (int64_t i = at; i < end; ++i) {
      const float d = v[i] - shift;
      a += d;
      q += d * d;
    }
    *sum += a;
    *squares += q;
  }
}

// What one plane of S values shares: the group's statistics, its channel's
// affine and the activation.
struct PlaneMath {
  float mean, invstd, gamma, beta;
  float below;  // the activation's slope below 0 (1 without an activation)
  // The gradient at the norm's output from the activation's: through the
  // activation's mask, recomputed from the normalised input xhat (a select,
  // not a branch, so that the loops vectorise).
  float G(float grad, float xhat) const { return xhat * gamma + beta > 0.0f ? grad : grad * below; }
};

// Sums of g and of g xhat over one plane.
void PlaneSums(const PlaneMath& m, const float* x, const float* grad, int64_t n, double* sum_g,
               double* sum_gx) {
  const PlaneMath k = m;  // a local copy: no store can alias it
  for (int64_t at = 0; at < n; at += kChunk) {
    const int64_t end = std::min(n, at + kChunk);
    float a = 0, q = 0;
#pragma omp simd reduction(+ : a, q)
    for (int64_t i = at; i < end; ++i) {
      const float xhat = (x[i] - k.mean) * k.invstd;
      const float g = k.G(grad[i], xhat);
      a += g;
      q += g * xhat;
    }
    *sum_g += a;
    *sum_gx += q;
  }
}

// grad_x over one plane, given the group's means of dxhat (m1) and of
// dxhat xhat (m2).
void PlaneGrad(const PlaneMath& m, const float* x, const float* grad, int64_t n, float m1, float m2,
               float* __restrict__ out) {
  const PlaneMath k = m;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float xhat = (x[i] - k.mean) * k.invstd;
    out[i] = (k.G(grad[i], xhat) * k.gamma - m1 - xhat * m2) * k.invstd;
  }
}

// One thread per statistics group. A group is a set of (sample, channel)
// planes of S contiguous values each: plane p starts at p * S and is
// channel p % C.
NormActGrads FusedCpu(const at::Tensor& x, const at::Tensor& grad_y_in, const at::Tensor& weight,
                      const at::Tensor& bias, const NormActSpec& spec) {
  const at::Tensor grad_y = grad_y_in.contiguous();  // (N, C, *S)
  const int64_t n = x.size(0), c = x.size(1);
  const int64_t s = n * c > 0 ? x.numel() / (n * c) : 0;
  const bool affine = weight.defined();
  const at::Tensor w_c = affine ? weight.contiguous() : at::Tensor();
  const at::Tensor b_c = affine ? bias.contiguous() : at::Tensor();
  const float* w = affine ? w_c.data_ptr<float>() : nullptr;
  const float* b = affine ? b_c.data_ptr<float>() : nullptr;
  const float* xp = x.data_ptr<float>();
  const float* gp = grad_y.data_ptr<float>();
  at::Tensor grad_x = at::empty_like(x, at::MemoryFormat::Contiguous);  // (N, C, *S)
  float* out = grad_x.data_ptr<float>();
  // Each plane's sums of g and g xhat, for the affine gradients.
  std::vector<double> plane_g(static_cast<size_t>(n * c)), plane_gx(static_cast<size_t>(n * c));

  int64_t groups = 0, planes_per_group = 1;
  switch (spec.groups) {
    case StatGroups::kChannel:
      groups = c;
      planes_per_group = n;
      break;
    case StatGroups::kSampleChannel:
      groups = n * c;
      break;
    case StatGroups::kSampleGroup:
      groups = n * spec.num_groups;
      planes_per_group = c / spec.num_groups;
      break;
  }
  // The group's j-th plane.
  auto plane_of = [&](int64_t group, int64_t j) -> int64_t {
    switch (spec.groups) {
      case StatGroups::kChannel:
        return j * c + group;
      case StatGroups::kSampleChannel:
        return group;
      case StatGroups::kSampleGroup:
        return group * planes_per_group + j;  // (sample, group) in order: channels in order
    }
    return 0;
  };

  at::parallel_for(0, groups, 1, [&](int64_t begin, int64_t end) {
    for (int64_t group = begin; group < end; ++group) {
      if (s == 0) continue;
      // Pass 1: the group's statistics, as the norm's forward took them
      // (biased variance).
      const float shift = xp[plane_of(group, 0) * s];
      double sum = 0, squares = 0;
      for (int64_t j = 0; j < planes_per_group; ++j)
        ShiftedSums(xp + plane_of(group, j) * s, s, shift, &sum, &squares);
      const double count = static_cast<double>(planes_per_group * s);
      const double mean_shifted = sum / count;
      const double var = std::max(squares / count - mean_shifted * mean_shifted, 0.0);
      PlaneMath m{static_cast<float>(shift + mean_shifted),
                  static_cast<float>(1.0 / std::sqrt(var + spec.eps)), 1.0f, 0.0f,
                  spec.act ? static_cast<float>(spec.slope) : 1.0f};
      // Pass 2: the sums of g and g xhat, per plane and over the group.
      double sum_dxhat = 0, sum_dxhat_xhat = 0;
      for (int64_t j = 0; j < planes_per_group; ++j) {
        const int64_t p = plane_of(group, j);
        m.gamma = affine ? w[p % c] : 1.0f;
        m.beta = affine ? b[p % c] : 0.0f;
        double pg = 0, pgx = 0;
        PlaneSums(m, xp + p * s, gp + p * s, s, &pg, &pgx);
        plane_g[static_cast<size_t>(p)] = pg;
        plane_gx[static_cast<size_t>(p)] = pgx;
        sum_dxhat += m.gamma * pg;
        sum_dxhat_xhat += m.gamma * pgx;
      }
      const float m1 = static_cast<float>(sum_dxhat / count);
      const float m2 = static_cast<float>(sum_dxhat_xhat / count);
      // Pass 3: the gradient.
      for (int64_t j = 0; j < planes_per_group; ++j) {
        const int64_t p = plane_of(group, j);
        m.gamma = affine ? w[p % c] : 1.0f;
        m.beta = affine ? b[p % c] : 0.0f;
        PlaneGrad(m, xp + p * s, gp + p * s, s, m1, m2, out + p * s);
      }
    }
  });

  NormActGrads grads;
  grads.x = grad_x;
  if (affine) {
    std::vector<double> gw(static_cast<size_t>(c)), gb(static_cast<size_t>(c));
    for (int64_t p = 0; p < n * c; ++p) {
      gw[static_cast<size_t>(p % c)] += plane_gx[static_cast<size_t>(p)];
      gb[static_cast<size_t>(p % c)] += plane_g[static_cast<size_t>(p)];
    }
    grads.weight = at::tensor(gw, at::kDouble).to(weight.scalar_type());  // (C)
    grads.bias = at::tensor(gb, at::kDouble).to(bias.scalar_type());      // (C)
  }
  return grads;
}

}  // namespace

std::vector<int64_t> DimsButChannels(int64_t dim, int64_t first) {
  std::vector<int64_t> dims;
  for (int64_t d = first; d < dim; ++d)
    if (d != 1) dims.push_back(d);
  return dims;
}

NormActGrads NormActBackwardByOps(const at::Tensor& x, const at::Tensor& grad_y,
                                  const at::Tensor& weight, const at::Tensor& bias,
                                  const NormActSpec& spec) {
  const bool affine = weight.defined();
  const int64_t n = x.size(0), c = x.size(1);
  at::Tensor grad_x = at::empty_like(x, at::MemoryFormat::Contiguous);  // (N, C, *S)
  at::Tensor grad_w = affine ? at::zeros_like(weight) : at::Tensor();
  at::Tensor grad_b = affine ? at::zeros_like(bias) : at::Tensor();
  const std::vector<int64_t> but_channels = DimsButChannels(x.dim(), 0);
  std::vector<int64_t> channel_shape(static_cast<size_t>(x.dim()), 1);

  // Samples [n0, n0 + nn), channels [c0, c0 + cn): whole statistics
  // groups, each normalised over `stat_dims` (none: the whole box is one
  // group).
  auto boxes = [&](int64_t n0, int64_t nn, int64_t c0, int64_t cn,
                   at::OptionalIntArrayRef stat_dims) {
    auto box = [&](const at::Tensor& t) { return t.narrow(0, n0, nn).narrow(1, c0, cn); };
    const at::Tensor z = box(x);
    auto [var, mean] = at::var_mean(z, stat_dims, /*correction=*/0, /*keepdim=*/true);
    const at::Tensor invstd = (var + spec.eps).rsqrt();
    const at::Tensor xhat = (z - mean) * invstd;
    channel_shape[1] = cn;
    const at::Tensor gam = affine ? weight.narrow(0, c0, cn).view(channel_shape) : at::Tensor();
    at::Tensor g = box(grad_y);
    if (spec.act) {
      const at::Tensor positive =
          (affine ? xhat * gam + bias.narrow(0, c0, cn).view(channel_shape) : xhat) > 0;
      g = spec.slope == 0.0 ? g * positive : at::where(positive, g, g * spec.slope);
    }
    if (affine) {
      grad_w.narrow(0, c0, cn).add_((g * xhat).sum(but_channels));
      grad_b.narrow(0, c0, cn).add_(g.sum(but_channels));
    }
    const at::Tensor dxhat = affine ? g * gam : g;
    const at::Tensor s1 = dxhat.mean(stat_dims, /*keepdim=*/true);
    const at::Tensor s2 = (dxhat * xhat).mean(stat_dims, /*keepdim=*/true);
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
  if (spec.groups == StatGroups::kChannel) {
    const std::vector<int64_t>& dims = but_channels;  // per channel over batch and voxels
    const int64_t k = channels_per_box(n * (per_sample / std::max<int64_t>(c, 1)));
    for (int64_t c0 = 0; c0 < c; c0 += k) boxes(0, n, c0, std::min(k, c - c0), dims);
  } else if (spec.groups == StatGroups::kSampleChannel) {
    const std::vector<int64_t> dims = DimsButChannels(x.dim(), 2);  // per sample and channel
    const int64_t k = channels_per_box(per_sample / std::max<int64_t>(c, 1));
    for (int64_t s = 0; s < n; ++s)
      for (int64_t c0 = 0; c0 < c; c0 += k) boxes(s, 1, c0, std::min(k, c - c0), dims);
  } else {
    const int64_t per = c / spec.num_groups;  // a group's channels, one box each
    for (int64_t s = 0; s < n; ++s)
      for (int64_t c0 = 0; c0 < c; c0 += per) boxes(s, 1, c0, per, at::OptionalIntArrayRef());
  }
  return {grad_x, grad_w, grad_b};
}

NormActGrads NormActBackward(const at::Tensor& x, const at::Tensor& grad_y,
                             const at::Tensor& weight, const at::Tensor& bias,
                             const NormActSpec& spec) {
  if (FusedApplies(x, grad_y, weight)) return FusedCpu(x, grad_y, weight, bias, spec);
  return NormActBackwardByOps(x, grad_y, weight, bias, spec);
}

}  // namespace up
