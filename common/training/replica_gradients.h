// The whole batch's gradients summed as pipeline.replicas copies sum them,
// for the single-process trainer: each replica's micro-batches accumulate
// in .grad in autograd's order, then the replicas' sums add up in replica
// order, ((g_0 + g_1) + g_2) + ..., the order every copy of a stage uses
// after its exchange (ipc/c10d_reduce.h). With one replica it does nothing.
//
// Usage, per step: run replica 0's micro-batches, EndReplica(), replica 1's,
// EndReplica(), ..., then Finish() leaves the sum in .grad.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace up {

class ReplicaGradientSum {
 public:
  explicit ReplicaGradientSum(std::vector<torch::Tensor> parameters)
      : parameters_(std::move(parameters)), sums_(parameters_.size()) {}

  // Folds the gradients accumulated since the last call into the sum and
  // clears them for the next replica's micro-batches.
  void EndReplica();
  // The sum becomes the parameters' gradients; ready for the next step.
  void Finish();

 private:
  std::vector<torch::Tensor> parameters_;
  std::vector<torch::Tensor> sums_;  // undefined until a replica gave one
};

}  // namespace up
