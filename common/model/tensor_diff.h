// Comparing tensors against a reference (a recording, or the single-process
// trainer) with a tolerance, and reporting it: one line per tensor with its
// largest absolute and relative difference. Used by replay and `check`.
//
// A tensor is within tolerance when every element has
// |got - want| <= atol + rtol * |want| (NaN equals NaN); atol = rtol = 0
// asks for bit-identical values (what the same CPU build gives).
#pragma once

#include <torch/torch.h>

#include <ostream>
#include <string>
#include <vector>

namespace up {

struct Tolerance {
  double atol = 0;
  double rtol = 0;
};

struct TensorDiff {
  std::string label;  // what was compared, e.g. "fwd step 1 mb 0 skip2"
  double max_abs = 0;
  double max_rel = 0;  // |got - want| / |want|, inf where want is 0 and got differs
  bool ok = true;
  std::string problem;  // set when the tensors cannot be compared (shape, dtype, missing)
};

TensorDiff CompareTensors(const std::string& label, const torch::Tensor& got,
                          const torch::Tensor& want, const Tolerance& tol);

// Collects diffs and prints them as they come: every one when `verbose`,
// otherwise only those beyond tolerance.
class DiffReport {
 public:
  DiffReport(std::ostream& out, Tolerance tol, bool verbose)
      : out_(out), tol_(tol), verbose_(verbose) {}

  void Compare(const std::string& label, const torch::Tensor& got, const torch::Tensor& want);
  void Missing(const std::string& label, const std::string& why);

  const Tolerance& tolerance() const { return tol_; }
  int compared() const { return compared_; }
  const std::vector<TensorDiff>& failures() const { return failures_; }
  double worst_abs() const { return worst_abs_; }
  // "N tensors compared, all within atol=.. rtol=.." or "K of N tensors beyond ..., first: ..".
  std::string Summary() const;

 private:
  void Add(const TensorDiff& d);

  std::ostream& out_;
  Tolerance tol_;
  bool verbose_;
  int compared_ = 0;
  double worst_abs_ = 0;
  std::vector<TensorDiff> failures_;
};

}  // namespace up
