// Where the stages run: which node (machine) holds each stage, which
// transport joins them, and the key of the device lock each one takes.
// A pure function of the pipeline's layout and the command line (tested
// without processes).
//
// With --nnodes N every node must hold a stage. When the config leaves every
// stage on node 0 (the default), the stages are spread in pipeline order,
// stage s of S on node s*N/S (two stages on two nodes: the decoder on node
// 1; with pipeline.placement: mirrored the encoder parts are spread and each
// decoder part follows its encoder part). Stages on different nodes need a
// c10d transport (gloo, or nccl between GPUs).
#pragma once

#include <string>
#include <vector>

#include "common/config/config.h"
#include "common/layout/pipeline_layout.h"

namespace up {

// The torchrun-style flags of `unet-pipeline train`.
struct NodeOptions {
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;        // 0: any free port (a run on one machine)
  std::string node_addr;      // this node's address for c10d; empty: the one toward master_addr
  bool store_exists = false;  // torchrun's agent serves the store: node 0 joins it too
};

struct Placement {
  std::vector<int> node;              // by stage index
  std::vector<std::string> lock_key;  // device ("cuda" as "cuda:0"), or "node<N>/<device>"
  bool c10d = false;                  // transport gloo or nccl
  bool Local(int stage, int node_rank) const {
    return node[static_cast<size_t>(stage)] == node_rank;
  }
};

// UsageError (naming the key or flag, the value and the fix) for an
// impossible placement.
Placement ResolvePlacement(const PipelineConfig& pipeline, const PipelineLayout& layout,
                           const NodeOptions& nodes);
// Two stages placed by pipeline.stages.{encoder,decoder}.
Placement ResolvePlacement(const PipelineConfig& pipeline, const NodeOptions& nodes);

// Replica `replica`'s stages (pipeline.replicas; `layout` is that replica's):
// on one machine as ResolvePlacement; over several, each replica on nodes of
// its own (ReplicaFirstNode, ReplicaNodes: the stages placed within them as
// ResolvePlacement places them over that many nodes) or whole replicas
// sharing a node, over a c10d transport. UsageError when neither count
// divides the other or the transport cannot cross machines.
Placement ResolveReplicaPlacement(const PipelineConfig& pipeline, const PipelineLayout& layout,
                                  const NodeOptions& nodes, int replica);

}  // namespace up
