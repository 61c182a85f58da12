// See placement.h.
#include "launcher/placement.h"

#include "common/errors.h"

namespace up {

Placement ResolvePlacement(const PipelineConfig& p, const NodeOptions& n) {
  if (n.nnodes < 1 || n.nnodes > 2) {
    throw UsageError("--nnodes " + std::to_string(n.nnodes) +
                     ": a U-Net split in two stages runs on 1 or 2 nodes");
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
  out.node[0] = p.encoder.node;
  out.node[1] = p.decoder.node;
  if (n.nnodes == 2 && out.node[0] == 0 && out.node[1] == 0) out.node[1] = 1;
  const char* keys[2] = {"pipeline.stages.encoder.node", "pipeline.stages.decoder.node"};
  for (int s = 0; s < 2; ++s) {
    if (out.node[s] >= n.nnodes) {
      throw UsageError(std::string(keys[s]) + " = " + std::to_string(out.node[s]) +
                       ", but --nnodes is " + std::to_string(n.nnodes) + "; give 0 to " +
                       std::to_string(n.nnodes - 1) + " or more nodes");
    }
  }
  if (n.nnodes == 2 && out.node[0] == out.node[1]) {
    throw UsageError("both stages are placed on node " + std::to_string(out.node[0]) +
                     " but --nnodes is 2: node " + std::to_string(1 - out.node[0]) +
                     " would hold nothing; set " + keys[1] + " (or use --nnodes 1)");
  }
  out.c10d = p.transport == "gloo" || p.transport == "nccl";
  if (out.node[0] != out.node[1] && !out.c10d) {
    throw UsageError("pipeline.transport = " + p.transport +
                     " cannot cross machines (the stages are on nodes " +
                     std::to_string(out.node[0]) + " and " + std::to_string(out.node[1]) +
                     "); set pipeline.transport: gloo (or nccl between GPUs)");
  }
  const std::string devices[2] = {p.encoder.device, p.decoder.device};
  for (int s = 0; s < 2; ++s) {
    out.lock_key[s] =
        n.nnodes > 1 ? "node" + std::to_string(out.node[s]) + "/" + devices[s] : devices[s];
  }
  return out;
}

}  // namespace up
