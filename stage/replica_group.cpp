// See replica_group.h.
#include "stage/replica_group.h"

#include "common/base/errors.h"
#include "common/base/logging.h"
#include "common/base/trace.h"
#include "ipc/c10d_channel.h"
#include "ipc/c10d_reduce.h"

namespace up::stage {
namespace {

constexpr int64_t kBucketBytes = 25 << 20;

ipc::C10dOptions GroupOptions(const ReplicaGroupOptions& o, const torch::Device& device) {
  const size_t colon = o.store.rfind(':');
  if (colon == std::string::npos || colon == 0)
    throw UsageError("--store '" + o.store + "' must be HOST:PORT");
  ipc::C10dOptions c;
  c.backend = device.is_cuda() ? "nccl" : "gloo";
  c.store_host = o.store.substr(0, colon);
  c.store_port = std::atoi(o.store.c_str() + colon + 1);
  c.prefix = o.run_id + "/replicas/" + o.stage_key;
  c.rank = o.replica;
  c.world_size = o.replicas;
  c.bind_host = o.bind_host;
  c.timeout_s = o.timeout_s;
  c.peers = "copies of the " + o.stage_key + " in the other replicas";
  return c;
}

}  // namespace

ReplicaGroup::ReplicaGroup(const ReplicaGroupOptions& options, const torch::Device& device)
    : options_(options),
      device_(device),
      wire_device_(device.is_cuda() ? device : torch::Device(torch::kCPU)),
      group_(ipc::JoinStageGroup(GroupOptions(options, device), device)) {}

void ReplicaGroup::SumGradients(torch::nn::Module& module) {
  TraceSpan span(trace_event::kReplicaExchange, "transfer");
  std::vector<torch::Tensor> params = module.parameters();
  const std::string what =
      Str("replica ", options_.replica, "'s ", options_.stage_key, " gradients");
  size_t begin = 0;
  while (begin < params.size()) {
    // One bucket: parameters in order until ~25 MiB.
    size_t end = begin;
    int64_t bytes = 0;
    while (end < params.size() && (end == begin || bytes < kBucketBytes)) {
      bytes += params[end].numel() * static_cast<int64_t>(sizeof(float));
      ++end;
    }
    std::vector<torch::Tensor> pieces;
    for (size_t i = begin; i < end; ++i) {
      const torch::Tensor& g = params[i].grad();
      pieces.push_back(g.defined() ? g.reshape({-1}).to(torch::kFloat32)
                                   : torch::zeros({params[i].numel()},
                                                  params[i].options().dtype(torch::kFloat32)));
    }
    torch::Tensor flat = torch::cat(pieces).to(wire_device_);  // (bucket elements,)
    ipc::OrderedAllReduceSum(*group_, flat, options_.timeout_s, what);
    int64_t offset = 0;
    for (size_t i = begin; i < end; ++i) {
      torch::Tensor& g = params[i].mutable_grad();
      const int64_t n = params[i].numel();
      if (g.defined()) g.copy_(flat.narrow(0, offset, n).view_as(g));
      offset += n;
    }
    begin = end;
  }
}

}  // namespace up::stage
