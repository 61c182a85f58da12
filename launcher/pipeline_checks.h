// The pipeline's plan: what the launcher resolves from the config before any
// process starts (the stages' layout and devices, each replica's placement,
// the schedule and the device lock), and the checks that turn away a run
// that could not work (a transport the devices cannot use, a key only the
// single-process trainer reads, a resume folder without this layout's stage
// files). PlanPipeline makes no process, file or socket, so a test can plan
// a run and drive its parts in-process; LogPipelinePlan says the plan.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "common/config/config.h"
#include "common/layout/pipeline_layout.h"
#include "common/training/checkpoint.h"
#include "ipc/schedule.h"
#include "launcher/debug_outputs.h"
#include "launcher/placement.h"

namespace up {

struct PipelinePlan {
  PipelineLayout layout;  // replica 0's stages, in pipeline order
  int stages = 0;         // S
  int replicas = 1;       // R: copies of the S stages; process r*S + s is replica r's stage s
  // Per replica: its slot among its node's replicas (its devices), its
  // layout (replica 0's is `layout`) and its placement.
  std::vector<int> slot;
  std::vector<PipelineLayout> replica_layout;
  std::vector<Placement> placements;
  std::vector<torch::Device> device;  // by stage index (replica 0's)
  bool all_cuda = false;              // every stage on a CUDA device
  bool any_cuda = false;
  bool parking = false;   // some stage parks its state between turns
  bool prefetch = false;  // the next phase's parked stage loads while this one computes
  std::vector<std::string> stage_files;  // a checkpoint's files (StageFileNames)
  bool lock_on = false;                  // stages take turns on their devices
  bool global_norms = false;             // a step needs every stage's grad norms
  std::vector<ChainPhase> phases;        // one training step's

  int processes() const { return stages * replicas; }
  const Placement& placement() const { return placements[0]; }  // replica 0's
};

// Resolves and checks the pipeline run of `config` (`resume`: the checkpoint
// it goes on from; `debug`: --record and --trace; `nodes`: this is node 0).
// UsageError naming the key and what to do for a run that cannot start.
PipelinePlan PlanPipeline(const Config& config, const std::optional<CheckpointRef>& resume,
                          const DebugOutputs& debug, const NodeOptions& nodes);

// The plan's lines in the log: where each stage runs, the schedule, the
// lock and the transport, and the replicas when there are several.
void LogPipelinePlan(const PipelinePlan& plan, const Config& config, const NodeOptions& nodes);

}  // namespace up
