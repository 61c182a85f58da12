// See pipeline_checks.h.
#include "launcher/pipeline_checks.h"

#include <algorithm>

#include "common/base/errors.h"
#include "common/base/logging.h"
#include "common/device/device_memory.h"
#include "common/training/stage_optimizer.h"
#include "common/training/stage_parking.h"
#include "launcher/device_lock.h"

namespace up {
namespace {

// pipeline.schedule as ipc/schedule.h's generator names it.
ScheduleKind ScheduleKindOf(Schedule s) {
  switch (s) {
    case Schedule::kSequential:
      return ScheduleKind::kSequential;
    case Schedule::kGpipe:
      return ScheduleKind::kGPipe;
    case Schedule::k1f1b:
      return ScheduleKind::k1F1B;
  }
  return ScheduleKind::kSequential;
}

// Each replica's slot, layout and placement.
void PlaceReplicas(const Config& config, const NodeOptions& nodes, PipelinePlan& plan) {
  const int R = plan.replicas;
  for (int r = 0; r < R; ++r) {
    plan.slot.push_back(R > 1 ? ReplicaSlot(R, nodes.nnodes, r) : 0);
    plan.replica_layout.push_back(plan.slot.back() == 0 ? plan.layout
                                                        : ResolveLayout(config, plan.slot.back()));
    plan.placements.push_back(
        ResolveReplicaPlacement(config.pipeline, plan.replica_layout.back(), nodes, r));
  }
}

// Whether some stage parks between turns: one that shares its device's lock
// with another stage, or one pipeline.park says parks anyway.
bool AnyParks(const Config& config, const PipelinePlan& plan) {
  const Placement& placement = plan.placement();
  bool parking = false;
  for (const StageSpec& s : plan.layout.stages) {
    bool shared = false;
    for (const StageSpec& o : plan.layout.stages)
      shared =
          shared || (o.index != s.index && placement.lock_key[static_cast<size_t>(o.index)] ==
                                               placement.lock_key[static_cast<size_t>(s.index)]);
    parking = parking || ShouldPark(config.pipeline.park, plan.device[static_cast<size_t>(s.index)],
                                    shared, config.train.memory_budget > 0);
  }
  return parking;
}

// pipeline.transport against the stages' devices.
void CheckTransport(const PipelineConfig& p, const PipelinePlan& plan) {
  const PipelineLayout& layout = plan.layout;
  auto devices_text = [&] {
    std::string out;
    for (const StageSpec& s : layout.stages)
      out += (out.empty() ? "" : ", ") + s.Key() + " " + s.device;
    return out;
  };
  if (p.transport == TransportKind::kNccl && !plan.all_cuda) {
    throw UsageError("pipeline.transport = nccl: every stage must be on a CUDA device (" +
                     devices_text() + "); use gloo");
  }
  if (p.transport == TransportKind::kNccl) {
    for (const StageChannel& ch : layout.channels) {
      if (plan.placement().lock_key[static_cast<size_t>(ch.from)] !=
          plan.placement().lock_key[static_cast<size_t>(ch.to)])
        continue;
      throw UsageError("pipeline.transport = nccl: the " +
                       layout.stages[static_cast<size_t>(ch.from)].Name() + " and the " +
                       layout.stages[static_cast<size_t>(ch.to)].Name() + " are both on " +
                       layout.stages[static_cast<size_t>(ch.from)].device +
                       "; NCCL joins different GPUs, so on one GPU use cuda_ipc (or shm)");
    }
  }
  if (p.transport == TransportKind::kCudaIpc && !plan.all_cuda) {
    throw UsageError("pipeline.transport = cuda_ipc: every stage must be on a CUDA device (" +
                     devices_text() + "); use shm");
  }
}

// The keys only the single-process trainer reads.
void CheckSingleProcessKeys(const TrainConfig& t) {
  if (t.checkpointing != Checkpointing::kOff) {
    throw UsageError("train.checkpointing = " + NameOf(t.checkpointing) +
                     " is the single-process trainer's; the pipeline recomputes with "
                     "pipeline.activations: recompute (or add --single-process)");
  }
  if (t.offload != OnOff::kOff) {
    throw UsageError("train.offload = " + NameOf(t.offload) +
                     " is the single-process trainer's; the pipeline offloads with "
                     "pipeline.offload: on (or add --single-process)");
  }
}

}  // namespace

PipelinePlan PlanPipeline(const Config& config, const std::optional<CheckpointRef>& resume,
                          const DebugOutputs& debug, const NodeOptions& nodes) {
  const TrainConfig& t = config.train;
  const PipelineConfig& p = config.pipeline;
  PipelinePlan plan;
  plan.layout = ResolveLayout(config);
  plan.stages = plan.layout.size();
  plan.replicas = p.replicas;
  PlaceReplicas(config, nodes, plan);
  if (plan.replicas > 1 && !debug.record_dir.empty()) {
    throw UsageError(Str("--record records one pipeline; pipeline.replicas is ", plan.replicas,
                         ": record with pipeline.replicas=1"));
  }
  for (const StageSpec& s : plan.layout.stages)
    plan.device.push_back(ParseDevice(s.device, s.device_key));
  plan.all_cuda = std::all_of(plan.device.begin(), plan.device.end(),
                              [](const torch::Device& d) { return d.is_cuda(); });
  plan.any_cuda = std::any_of(plan.device.begin(), plan.device.end(),
                              [](const torch::Device& d) { return d.is_cuda(); });
  plan.parking = AnyParks(config, plan);
  plan.prefetch = plan.parking && p.prefetch == OnOff::kOn;
  CheckTransport(p, plan);
  CheckSingleProcessKeys(t);
  plan.stage_files = StageFileNames(config);
  if (resume) CheckStageFiles(resume->dir, plan.stage_files);
  plan.lock_on = ResolveLock(p.lock, plan.placement().lock_key, p.schedule);
  const ScheduleKind kind = ScheduleKindOf(p.schedule);
  plan.global_norms = NeedsGlobalNorms(t);
  plan.phases = ChainSchedule(kind, plan.stages, t.micro_batches, plan.global_norms);
  return plan;
}

void LogPipelinePlan(const PipelinePlan& plan, const Config& config, const NodeOptions& nodes) {
  const TrainConfig& t = config.train;
  const PipelineConfig& p = config.pipeline;
  const PipelineLayout& layout = plan.layout;
  const std::vector<torch::Device>& device = plan.device;
  const int S = plan.stages;
  const int R = plan.replicas;
  auto where = [&](int s) {
    return nodes.nnodes > 1 ? Str(" (node ", plan.placement().node[static_cast<size_t>(s)], ")")
                            : std::string();
  };
  if (layout.two_stage()) {
    LogInfo(Str("pipeline: encoder on ", device[0].str(), where(0), ", decoder on ",
                device[1].str(), where(1), plan.parking ? " (parking between turns)" : "",
                ", activations ", p.activations));
    LogInfo(Str("pipeline: schedule ", NameOf(p.schedule), " ",
                DescribeChainSchedule(plan.phases, {"E", "D"}), ", lock ",
                plan.lock_on ? "on" : "off", ", transport ", p.transport));
  } else {
    std::string parts;
    for (const StageSpec& s : layout.stages)
      parts += Str(parts.empty() ? "" : "; ", s.index, " ", s.Key(), " ", s.LevelsText(), " on ",
                   device[static_cast<size_t>(s.index)].str(), where(s.index));
    LogInfo(Str("pipeline: ", S, " stages: ", parts, plan.parking ? " (parking between turns)" : "",
                ", activations ", p.activations));
    LogInfo(Str("pipeline: schedule ", NameOf(p.schedule), " ", DescribeChainSchedule(plan.phases),
                ", lock ", plan.lock_on ? "on" : "off", ", transport ", p.transport, ", ",
                layout.channels.size(), " channels"));
  }
  if (R == 1) return;
  std::string where_r;
  for (int r = 1; r < R; ++r) {
    std::string on;
    for (const StageSpec& s : plan.replica_layout[static_cast<size_t>(r)].stages) {
      on += (on.empty() ? "" : "/") + s.device +
            (nodes.nnodes > 1
                 ? Str(" (node ",
                       plan.placements[static_cast<size_t>(r)].node[static_cast<size_t>(s.index)],
                       ")")
                 : std::string());
    }
    where_r += Str(", ", r, " on ", on);
  }
  LogInfo(Str("pipeline: ", R, " replicas of the ", S, " stages, each taking ",
              MicroBatchSamples(config) * t.micro_batches, " of each batch's ", t.batch_size,
              " samples; replica 0 as above", where_r, "; gradients summed in replica order (",
              device[0].is_cuda() ? "nccl" : "gloo", ")"));
}

}  // namespace up
