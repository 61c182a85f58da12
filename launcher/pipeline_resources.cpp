// See pipeline_resources.h.
#include "launcher/pipeline_resources.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "common/base/errors.h"
#include "common/base/logging.h"
#include "common/base/sha256.h"
#include "common/base/test_hooks.h"
#include "common/config/config_file.h"
#include "launcher/stale_runs.h"
#include "launcher/stop_signal.h"
#include "launcher/time_balance.h"

namespace up {

namespace fs = std::filesystem;

std::vector<StageLink> UnstartedStageLinks(const PipelinePlan& plan) {
  const int S = plan.stages;
  const int R = plan.replicas;
  std::vector<StageLink> links;
  for (int r = 0; r < R; ++r) {
    for (const StageSpec& spec : plan.layout.stages) {
      const int s = spec.index;
      StageLink link;
      link.index = r * S + s;
      link.stage = s;
      link.replica = r;
      link.key = ReplicaKey(spec.Key(), r);
      link.label = (spec.parts == 1 ? spec.Name() + " stage" : spec.Name()) +
                   (R > 1 ? Str(" of replica ", r) : "");
      // Each replica takes turns on its own devices.
      const Placement& at = plan.placements[static_cast<size_t>(r)];
      link.device = at.lock_key[static_cast<size_t>(s)] + (r > 0 ? Str("/r", r) : "");
      link.node = at.node[static_cast<size_t>(s)];
      links.push_back(std::move(link));
    }
  }
  return links;
}

PipelineResources::PipelineResources(const Config& config, const PipelinePlan& plan,
                                     const RunDir& run, const std::optional<CheckpointRef>& resume,
                                     const DebugOutputs& debug, const NodeOptions& nodes)
    : config_(config),
      plan_(plan),
      run_path_(run.path()),
      resume_(resume),
      debug_(debug),
      nodes_(nodes),
      run_id_(ipc::RunId::Random()),
      prefix_(RunNamePrefix(getpid(), run_id_.Hex())),
      sockets_(run_id_.Hex()),
      rendezvous_(MeetIfNeeded()),
      listener_(Listen()),
      rings_(CreateRings()),
      cpu_stage_(CpuStages()),
      cpu_budget_(CreateCpuBudget()),
      config_sha_(Sha256Hex(DumpConfig(config))),
      stages_(StartStages(), [this](const StageLink& link) { return RemoteExitOf(link); }) {}

PipelineResources::~PipelineResources() {
  if (!armed_) return;
  for (auto& ring : rings_) ring->Abort("the launcher stopped the run");
  stages_.KillAll();
}

std::optional<int64_t> PipelineResources::SharedCpuPeak(int s) const {
  if (!cpu_budget_ || !cpu_stage_[static_cast<size_t>(s)]) return std::nullopt;
  return cpu_budget_->get()->peak.load();
}

// A c10d transport meets at a TCPStore; stages on other nodes reach the
// launcher over TCP, on --master-addr only. Replicas meet there too, one
// process group per stage (replica_group.h).
std::optional<Rendezvous> PipelineResources::MeetIfNeeded() const {
  if (!plan_.placement().c10d && plan_.replicas == 1) return std::nullopt;
  const double timeout_s = config_.pipeline.timeout_s;
  return nodes_.store_exists ? Rendezvous::Join(nodes_.master_addr, nodes_.master_port, timeout_s)
                             : Rendezvous::Serve(nodes_.master_addr, nodes_.master_port, timeout_s);
}

ipc::ControlListener PipelineResources::Listen() const {
  return nodes_.nnodes > 1 ? ipc::ControlListener::ListenTcp(nodes_.master_addr)
                           : ipc::ControlListener::Listen(sockets_.path() + "/control.sock");
}

std::string PipelineResources::RingPrefix(int replica) const {
  return plan_.replicas > 1 ? Str(prefix_, "-r", replica) : prefix_;
}

// One pair of rings per channel (the shared-memory transports only), each
// slot sized for the channel's message; each replica has its own.
std::vector<std::unique_ptr<ipc::ShmRing>> PipelineResources::CreateRings() const {
  std::vector<std::unique_ptr<ipc::ShmRing>> rings;
  for (int r = 0; r < plan_.replicas && !plan_.placement().c10d; ++r) {
    for (const StageChannel& ch : plan_.layout.channels) {
      std::vector<ipc::TensorSpec> wire_specs;
      for (const WireTensor& w : ch.tensors)
        wire_specs.push_back({w.name, ipc::DType::kFloat32, w.shape});
      const uint64_t slot_bytes = ipc::ShmRing::PayloadBytesFor(wire_specs);
      for (bool forward : {true, false}) {
        rings.push_back(
            ipc::ShmRing::Create({ChannelRingName(RingPrefix(r), ch, forward), run_id_,
                                  static_cast<uint32_t>(config_.train.micro_batches), slot_bytes}));
      }
    }
  }
  return rings;
}

// The stages on a CPU of this node: they share its budget segment.
std::vector<bool> PipelineResources::CpuStages() const {
  std::vector<bool> cpu_stage;
  for (int s = 0; s < plan_.stages; ++s) {
    cpu_stage.push_back(!plan_.device[static_cast<size_t>(s)].is_cuda() &&
                        plan_.placement().Local(s, 0));
  }
  return cpu_stage;
}

// The CPU device the local stages share keeps its tensor total (and the
// budget, when there is one) in shared memory that each stage charges.
std::optional<ipc::DeviceBudgetSegment> PipelineResources::CreateCpuBudget() const {
  if (std::find(cpu_stage_.begin(), cpu_stage_.end(), true) == cpu_stage_.end())
    return std::nullopt;
  return ipc::DeviceBudgetSegment::Create(prefix_ + "-budget", config_.train.memory_budget);
}

std::vector<StageLink> PipelineResources::StartStages() {
  const PipelineConfig& p = config_.pipeline;
  if (rendezvous_) {  // what the other nodes' launchers start their stages with
    // The cuts first: pipeline.balance: time's are node 0's alone (time_balance.h).
    rendezvous_->Set("up/cuts", EncodeCuts(p));
    rendezvous_->Set("up/run", RunAnnouncement{run_id_.Hex(), listener_.endpoint(), config_sha_,
                                               resume_.has_value()}
                                   .Encode());
  }
  std::vector<StageLink> links = UnstartedStageLinks(plan_);
  for (StageLink& link : links) {
    const StageSpec& spec = plan_.layout.stages[static_cast<size_t>(link.stage)];
    if (!plan_.placements[static_cast<size_t>(link.replica)].Local(link.stage, 0)) continue;
    link.child.emplace(
        ChildProcess::Spawn({link.key,
                             StageBinary(spec.encoder ? "encoder_proc" : "decoder_proc"),
                             StageArgs(spec, link.replica),
                             {},
                             true,
                             ""}));
    StopSignals::WatchChild(link.child->pid());  // a second Ctrl-C kills them
  }
  TestHookPoint("launcher", "spawn");
  return links;
}

std::vector<std::string> PipelineResources::StageArgs(const StageSpec& spec, int r) const {
  const PipelineConfig& p = config_.pipeline;
  const std::string key = ReplicaKey(spec.Key(), r);
  const std::string config_path = (fs::path(run_path_) / "config.yaml").string();
  std::vector<std::string> args{"--config",  config_path,
                                "--control", listener_.endpoint(),
                                "--run-id",  run_id_.Hex(),
                                "--part",    std::to_string(spec.part + 1),
                                "--log",     (fs::path(run_path_) / (key + ".log")).string()};
  if (plan_.replicas > 1) {
    args.insert(args.end(), {"--replica", std::to_string(r), "--replica-slot",
                             std::to_string(plan_.slot[static_cast<size_t>(r)])});
  }
  if (plan_.placement().c10d) args.insert(args.end(), {"--c10d", NameOf(p.transport)});
  if (rendezvous_) {
    args.insert(args.end(), {"--store", rendezvous_->address(), "--node-addr", nodes_.master_addr});
  }
  if (!plan_.placement().c10d) args.insert(args.end(), {"--rings", RingPrefix(r)});
  // Every replica starts from replica 0's files (the run keeps one copy).
  if (resume_) {
    args.insert(args.end(), {"--load", (fs::path(resume_->dir) / (spec.Key() + ".pt")).string()});
  }
  if (cpu_budget_ && cpu_stage_[static_cast<size_t>(spec.index)])
    args.insert(args.end(), {"--device-budget", prefix_ + "-budget"});
  for (std::string& a : StageDebugArgs(debug_, key)) args.push_back(std::move(a));
  return args;
}

std::string PipelineResources::RemoteExitOf(const StageLink& link) {
  return rendezvous_
             ? rendezvous_->Get("up/" + run_id_.Hex() + "/exit/" + link.key, 2.0).value_or("")
             : std::string();
}

}  // namespace up
