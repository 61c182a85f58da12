// A launcher on a node other than 0 (`train --nnodes 2 --node-rank 1 ...`):
// it meets node 0 at the rendezvous, checks that both were given the same
// config, starts the stage(s) placed on this node, and watches them until
// they end. Node 0's launcher drives the run and writes the run folder; this
// node keeps only its stages' logs (in `log_dir`). If a stage dies, its exit
// is published so node 0 can name it; Ctrl-C here stops this node's stages at
// once (stop a run gracefully from node 0).
#pragma once

#include <string>

#include "common/config/config.h"
#include "launcher/placement.h"

namespace up {

// Returns the exit code: 0 when the stages finished the run.
int RunNodeAgent(const Config& config, const NodeOptions& nodes, const std::string& log_dir);

}  // namespace up
