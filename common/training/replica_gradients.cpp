// See replica_gradients.h.
#include "common/training/replica_gradients.h"

namespace up {

void ReplicaGradientSum::EndReplica() {
  for (size_t i = 0; i < parameters_.size(); ++i) {
    torch::Tensor& grad = parameters_[i].mutable_grad();
    if (!grad.defined()) continue;
    if (sums_[i].defined()) {
      sums_[i].add_(grad);
    } else {
      sums_[i] = grad;
    }
    grad = torch::Tensor();
  }
}

void ReplicaGradientSum::Finish() {
  for (size_t i = 0; i < parameters_.size(); ++i) {
    if (sums_[i].defined()) parameters_[i].mutable_grad() = sums_[i];
    sums_[i] = torch::Tensor();
  }
}

}  // namespace up
