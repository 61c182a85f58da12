// See tensor_diff.h.
#include "common/model/tensor_diff.h"

#include <cmath>
#include <cstdio>
#include <limits>

namespace up {
namespace {

std::string Line(const TensorDiff& d) {
  char buf[96];
  std::snprintf(buf, sizeof(buf), "max_abs %-12.6g max_rel %-12.6g", d.max_abs, d.max_rel);
  return "  " + std::string(d.ok ? "ok  " : "DIFF") + " " + d.label + "  " +
         (d.problem.empty() ? std::string(buf) : d.problem);
}

}  // namespace

TensorDiff CompareTensors(const std::string& label, const torch::Tensor& got,
                          const torch::Tensor& want, const Tolerance& tol) {
  TensorDiff d;
  d.label = label;
  if (got.sizes() != want.sizes() || got.scalar_type() != want.scalar_type()) {
    d.ok = false;
    d.problem = "got " + c10::str(got.sizes()) + " " + c10::toString(got.scalar_type()) +
                ", recorded " + c10::str(want.sizes()) + " " + c10::toString(want.scalar_type());
    return d;
  }
  if (got.numel() == 0) return d;
  const torch::Tensor g = got.detach().cpu().to(torch::kFloat64);   // same shape as want
  const torch::Tensor w = want.detach().cpu().to(torch::kFloat64);  // same shape as got
  const torch::Tensor both_nan = g.isnan().logical_and(w.isnan());
  const torch::Tensor diff = (g - w).abs().masked_fill(both_nan, 0);  // NaN where only one is
  const torch::Tensor scale = w.abs();
  const torch::Tensor bad = diff.gt(tol.atol + tol.rtol * scale).logical_or(diff.isnan());
  d.ok = !bad.any().item<bool>();
  d.max_abs = diff.isnan().any().item<bool>() ? std::numeric_limits<double>::quiet_NaN()
                                              : diff.max().item<double>();
  const torch::Tensor rel =
      torch::where(diff.eq(0), torch::zeros_like(diff), diff / scale);  // inf where want is 0
  d.max_rel = rel.isnan().any().item<bool>() ? std::numeric_limits<double>::quiet_NaN()
                                             : rel.max().item<double>();
  return d;
}

void DiffReport::Compare(const std::string& label, const torch::Tensor& got,
                         const torch::Tensor& want) {
  Add(CompareTensors(label, got, want, tol_));
}

void DiffReport::Missing(const std::string& label, const std::string& why) {
  TensorDiff d;
  d.label = label;
  d.ok = false;
  d.problem = why;
  Add(d);
}

void DiffReport::Add(const TensorDiff& d) {
  ++compared_;
  if (std::isnan(d.max_abs) || d.max_abs > worst_abs_) worst_abs_ = d.max_abs;
  if (!d.ok) failures_.push_back(d);
  if (verbose_ || !d.ok) out_ << Line(d) << "\n";
}

std::string DiffReport::Summary() const {
  char tol[64];
  std::snprintf(tol, sizeof(tol), "atol=%g rtol=%g", tol_.atol, tol_.rtol);
  if (failures_.empty()) {
    char worst[48];
    std::snprintf(worst, sizeof(worst), " (largest abs difference %g)", worst_abs_);
    return std::to_string(compared_) + " tensors compared, all within " + tol + worst;
  }
  const TensorDiff& f = failures_.front();
  char first[96];
  std::snprintf(first, sizeof(first), " (max_abs %g, max_rel %g)", f.max_abs, f.max_rel);
  return std::to_string(failures_.size()) + " of " + std::to_string(compared_) +
         " tensors beyond " + tol + "; first: " + f.label +
         (f.problem.empty() ? std::string(first) : " (" + f.problem + ")");
}

}  // namespace up
