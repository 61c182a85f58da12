// The multi-process pipeline, as the launcher runs it: start encoder_proc and
// decoder_proc, create the run's rings and control socket, handshake, grant
// device turns by the schedule, collect metrics, checkpoint both stages
// together, and clean up every process, segment and socket however the run
// ends.
#pragma once

#include <optional>

#include "common/config/config.h"
#include "common/run/run_dir.h"
#include "common/training/checkpoint.h"
#include "launcher/debug_outputs.h"
#include "launcher/placement.h"
#include "launcher/single_process.h"

namespace up {

// `debug`: --record and --trace (debug_outputs.h). `nodes`: this is node 0
// of `nodes.nnodes` (a stage placed on another node is started there by
// that node's launcher, node_agent.h).
TrainSummary RunPipeline(const Config& config, RunDir& run,
                         const std::optional<CheckpointRef>& resume, const DebugOutputs& debug = {},
                         const NodeOptions& nodes = {});

}  // namespace up
