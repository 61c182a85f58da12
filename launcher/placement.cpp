// See placement.h.
#include "launcher/placement.h"

#include "common/base/errors.h"

namespace up {
namespace {

// The key that places stage `s`, for messages.
std::string NodeKey(const PipelineConfig& p, const PipelineLayout& layout, int s) {
  if (!p.nodes.empty()) return "pipeline.nodes";
  if (layout.two_stage())
    return s == 0 ? "pipeline.stages.encoder.node" : "pipeline.stages.decoder.node";
  return layout.stages[static_cast<size_t>(s)].encoder ? "pipeline.stages.encoder.node"
                                                       : "pipeline.stages.decoder.node";
}

}  // namespace

Placement ResolvePlacement(const PipelineConfig& p, const PipelineLayout& layout,
                           const NodeOptions& n) {
  const int S = layout.size();
  if (n.nnodes < 1 || n.nnodes > S) {
    throw UsageError("--nnodes " + std::to_string(n.nnodes) + ": a U-Net split in " +
                     std::to_string(S) + " stages runs on 1 to " + std::to_string(S) +
                     " nodes (more stages: pipeline.encoder_parts, pipeline.decoder_parts)");
  }
  if (n.node_rank < 0 || n.node_rank >= n.nnodes) {
    throw UsageError("--node-rank " + std::to_string(n.node_rank) + " with --nnodes " +
                     std::to_string(n.nnodes) + ": give 0 to " + std::to_string(n.nnodes - 1));
  }
  if (n.master_port < 0 || n.master_port > 65535 || (n.nnodes > 1 && n.master_port == 0)) {
    throw UsageError("--master-port " + std::to_string(n.master_port) +
                     (n.nnodes > 1 ? ": a run on several nodes needs a port of 1 to 65535, the "
                                     "same on every node (e.g. 29500)"
                                   : ": give 0 (any free port) to 65535"));
  }
  Placement out;
  bool any_given = false;
  for (const StageSpec& s : layout.stages) {
    out.node.push_back(s.node);
    any_given = any_given || s.node != 0;
  }
  if (n.nnodes > 1 && !any_given) {  // spread in pipeline order
    int encoder_parts = 0;
    for (const StageSpec& s : layout.stages) encoder_parts += s.encoder ? 1 : 0;
    for (const StageSpec& s : layout.stages) {
      if (p.placement == PlacementKind::kMirrored) {
        const int e = s.encoder ? s.index : layout.EncoderStageOf(s.lo);
        out.node[static_cast<size_t>(s.index)] = e * n.nnodes / encoder_parts;
      } else {
        out.node[static_cast<size_t>(s.index)] = s.index * n.nnodes / S;
      }
    }
  }
  std::vector<bool> used(static_cast<size_t>(n.nnodes), false);
  for (int s = 0; s < S; ++s) {
    const int node = out.node[static_cast<size_t>(s)];
    if (node >= n.nnodes) {
      const std::string key = NodeKey(p, layout, s);
      throw UsageError(key + (key == "pipeline.nodes" ? "[" + std::to_string(s) + "]" : "") +
                       " = " + std::to_string(node) + ", but --nnodes is " +
                       std::to_string(n.nnodes) + "; give 0 to " + std::to_string(n.nnodes - 1) +
                       " or more nodes");
    }
    used[static_cast<size_t>(node)] = true;
  }
  for (int node = 0; node < n.nnodes; ++node) {
    if (used[static_cast<size_t>(node)]) continue;
    throw UsageError(
        (S == 2 ? std::string("both stages are placed on node ") + std::to_string(out.node[0])
                : std::string("the stages are placed")) +
        " but --nnodes is " + std::to_string(n.nnodes) + ": node " + std::to_string(node) +
        " would hold nothing; set " +
        (S == 2 ? NodeKey(p, layout, 1) : std::string("pipeline.nodes")) + " (or use fewer nodes)");
  }
  out.c10d = p.transport == TransportKind::kGloo || p.transport == TransportKind::kNccl;
  for (const StageChannel& ch : layout.channels) {
    const int a = out.node[static_cast<size_t>(ch.from)], b = out.node[static_cast<size_t>(ch.to)];
    if (a != b && !out.c10d) {
      throw UsageError(
          "pipeline.transport = " + NameOf(p.transport) + " cannot cross machines (the " +
          layout.stages[static_cast<size_t>(ch.from)].Name() + " and the " +
          layout.stages[static_cast<size_t>(ch.to)].Name() + " are on nodes " + std::to_string(a) +
          " and " + std::to_string(b) + "); set pipeline.transport: gloo (or nccl between GPUs)");
    }
  }
  for (const StageSpec& s : layout.stages) {
    const std::string device = s.device == "cuda" ? "cuda:0" : s.device;
    out.lock_key.push_back(n.nnodes > 1
                               ? "node" + std::to_string(out.node[static_cast<size_t>(s.index)]) +
                                     "/" + device
                               : device);
  }
  return out;
}

Placement ResolvePlacement(const PipelineConfig& p, const NodeOptions& n) {
  PipelineLayout layout;
  layout.levels = 1;
  StageSpec encoder, decoder;
  encoder.encoder = true;
  encoder.index = 0;
  encoder.device = p.encoder.device;
  encoder.node = p.encoder.node;
  encoder.lo = 0;
  encoder.hi = 1;
  decoder.encoder = false;
  decoder.index = 1;
  decoder.device = p.decoder.device;
  decoder.node = p.decoder.node;
  layout.stages = {encoder, decoder};
  layout.channels = {StageChannel{0, 1, {}}};
  return ResolvePlacement(p, layout, n);
}

Placement ResolveReplicaPlacement(const PipelineConfig& p, const PipelineLayout& layout,
                                  const NodeOptions& n, int replica) {
  const int R = p.replicas;
  if (R == 1 || n.nnodes == 1) return ResolvePlacement(p, layout, n);
  const int span = ReplicaNodes(R, n.nnodes);
  if (span == 0) {
    throw UsageError("pipeline.replicas = " + std::to_string(R) + " over --nnodes " +
                     std::to_string(n.nnodes) +
                     ": one must divide the other (each replica on nodes of its own, or whole "
                     "replicas sharing each node)");
  }
  if (p.transport != TransportKind::kGloo && p.transport != TransportKind::kNccl) {
    throw UsageError("pipeline.replicas = " + std::to_string(R) + " over --nnodes " +
                     std::to_string(n.nnodes) + ": pipeline.transport = " + NameOf(p.transport) +
                     " stays on one machine; set pipeline.transport: gloo (or nccl between GPUs)");
  }
  if (n.node_rank < 0 || n.node_rank >= n.nnodes) {
    throw UsageError("--node-rank " + std::to_string(n.node_rank) + " with --nnodes " +
                     std::to_string(n.nnodes) + ": give 0 to " + std::to_string(n.nnodes - 1));
  }
  NodeOptions within = n;  // the replica's own nodes, counted from 0
  within.nnodes = span;
  within.node_rank = 0;
  Placement out = ResolvePlacement(p, layout, within);
  const int first = ReplicaFirstNode(R, n.nnodes, replica);
  out.lock_key.clear();
  for (const StageSpec& s : layout.stages) {
    int& node = out.node[static_cast<size_t>(s.index)];
    node += first;
    out.lock_key.push_back("node" + std::to_string(node) + "/" +
                           (s.device == "cuda" ? "cuda:0" : s.device));
  }
  out.c10d = true;
  return out;
}

}  // namespace up
