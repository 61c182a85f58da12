// Where the stages run: which node (machine) holds each stage, which
// transport joins them, and the key of the device lock each one takes.
// A pure function of the config and the command line (tested without
// processes).
//
// With --nnodes 2 every node must hold a stage; when the config leaves both
// stages on node 0 (the default), the decoder goes to node 1. Stages on
// different nodes need a c10d transport (gloo, or nccl between GPUs).
#pragma once

#include <string>

#include "common/config.h"

namespace up {

// The torchrun-style flags of `unet-pipeline train`.
struct NodeOptions {
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;    // 0: any free port (a run on one machine)
  std::string node_addr;  // this node's address for c10d; empty: the one toward master_addr
};

struct Placement {
  int node[2] = {0, 0};     // by StageId
  std::string lock_key[2];  // device, or "node<N>/<device>" across nodes
  bool c10d = false;        // transport gloo or nccl
  bool Local(int stage, int node_rank) const { return node[stage] == node_rank; }
};

// UsageError (naming the key or flag, the value and the fix) for an
// impossible placement.
Placement ResolvePlacement(const PipelineConfig& pipeline, const NodeOptions& nodes);

}  // namespace up
