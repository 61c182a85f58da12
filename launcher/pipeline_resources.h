// The resources of one pipeline run, owned together for the run's length:
// the private socket folder, the rendezvous (a c10d transport, replicas or
// several nodes), the control listener, the rings of each channel (the
// shared-memory transports), the CPU device's budget segment, and the stage
// processes with their control connections. Made in that order and released
// in the reverse one: the processes are killed first and the rings removed
// after them, the socket folder last.
//
// Until Disarm() (the orderly shutdown), destruction first aborts every ring
// (a stage blocked on one wakes) and kills the stages still running, so
// however the run ends no process, segment or socket is left behind. Not
// copyable or movable: the stages' exit reports refer to it.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/config/config.h"
#include "common/run/run_dir.h"
#include "common/training/checkpoint.h"
#include "ipc/control_channel.h"
#include "ipc/device_budget_segment.h"
#include "ipc/ring_format.h"
#include "ipc/shm_ring.h"
#include "launcher/debug_outputs.h"
#include "launcher/pipeline_checks.h"
#include "launcher/rendezvous.h"
#include "launcher/stage_binary.h"
#include "launcher/stage_link.h"

namespace up {

// One link per process of `plan` (index r*S + s) with its key, label, lock
// key and node, no process or connection yet.
std::vector<StageLink> UnstartedStageLinks(const PipelinePlan& plan);

class PipelineResources {
 public:
  // Makes the resources and starts the stages on this node (those on other
  // nodes are started by their nodes' launchers, from the announcement in
  // the rendezvous). `config`, `plan`, `resume`, `debug` and `nodes` must
  // outlive it.
  PipelineResources(const Config& config, const PipelinePlan& plan, const RunDir& run,
                    const std::optional<CheckpointRef>& resume, const DebugOutputs& debug,
                    const NodeOptions& nodes);
  ~PipelineResources();
  PipelineResources(const PipelineResources&) = delete;
  PipelineResources& operator=(const PipelineResources&) = delete;

  // Every stage said Bye and exited: nothing is left to abort.
  void Disarm() { armed_ = false; }

  const ipc::RunId& run_id() const { return run_id_; }
  ipc::ControlListener& listener() { return listener_; }
  StageGroup& stages() { return stages_; }
  const std::string& config_sha() const { return config_sha_; }  // of DumpConfig(config)
  // The peak of the CPU device the local CPU stages share, when there is
  // one and stage `s` (replica 0's) charges it.
  std::optional<int64_t> SharedCpuPeak(int s) const;

 private:
  std::optional<Rendezvous> MeetIfNeeded() const;
  ipc::ControlListener Listen() const;
  std::string RingPrefix(int replica) const;
  std::vector<std::unique_ptr<ipc::ShmRing>> CreateRings() const;
  std::vector<bool> CpuStages() const;
  std::optional<ipc::DeviceBudgetSegment> CreateCpuBudget() const;
  // Announces the run in the rendezvous, then spawns this node's stages.
  std::vector<StageLink> StartStages();
  std::vector<std::string> StageArgs(const StageSpec& spec, int replica) const;
  std::string RemoteExitOf(const StageLink& link);

  const Config& config_;
  const PipelinePlan& plan_;
  const std::string run_path_;
  const std::optional<CheckpointRef>& resume_;
  const DebugOutputs& debug_;
  const NodeOptions& nodes_;

  const ipc::RunId run_id_;
  const std::string prefix_;  // of the run's shared-memory names
  RunScratchDir sockets_;
  std::optional<Rendezvous> rendezvous_;
  ipc::ControlListener listener_;
  std::vector<std::unique_ptr<ipc::ShmRing>> rings_;  // one pair per channel and replica
  std::vector<bool> cpu_stage_;  // by stage index: on a CPU of this node, charging cpu_budget_
  std::optional<ipc::DeviceBudgetSegment> cpu_budget_;
  const std::string config_sha_;
  StageGroup stages_;
  bool armed_ = true;
};

}  // namespace up
