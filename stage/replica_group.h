// A stage's copies in the other replicas of the pipeline (pipeline.replicas):
// one c10d process group per stage of the pipeline, rank = replica, that
// meets at the launcher's TCPStore. After the stage's last backward of a
// step, SumGradients makes every copy's gradients the sum over the
// copies, in replica order (ipc/c10d_reduce.h), before fp16's unscale, the
// norms and the step: the copies then step alike and stay equal.
//
// The gradients travel in buckets of about 25 MiB (as DDP's), each flattened
// in the module's parameter order. Each micro-batch's loss is already scaled
// by 1 / (micro_batches x replicas), so the sum is the mean DDP would take.
// Gloo carries host tensors (device gradients are copied to the host and
// back), NCCL device tensors.
#pragma once

#include <torch/torch.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <string>

namespace up::stage {

struct ReplicaGroupOptions {
  std::string store;      // HOST:PORT of the launcher's TCPStore
  std::string run_id;     // hex: the store keys' prefix
  std::string stage_key;  // "encoder", "decoder2": one group per stage of the pipeline
  std::string bind_host;  // this node's address for Gloo's sockets
  int replica = 0;
  int replicas = 1;
  double timeout_s = 120;
};

class ReplicaGroup {
 public:
  // Joins the group of `options.stage_key`'s copies (NCCL on a CUDA device,
  // else Gloo). TimeoutError when a copy does not join.
  ReplicaGroup(const ReplicaGroupOptions& options, const torch::Device& device);

  // Sums `module`'s gradients over the copies, in replica order. A parameter
  // without a gradient adds zeros and keeps none.
  void SumGradients(torch::nn::Module& module);

  int replica() const { return options_.replica; }

 private:
  const ReplicaGroupOptions options_;
  const torch::Device device_;       // where the gradients live
  const torch::Device wire_device_;  // where the backend wants them
  c10::intrusive_ptr<c10d::Backend> group_;
};

}  // namespace up::stage
