// See pipeline.h.
#include "launcher/pipeline.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>

#include "common/base/byte_size.h"
#include "common/base/deadline.h"
#include "common/base/errors.h"
#include "common/base/fs_util.h"
#include "common/base/json_writer.h"
#include "common/base/logging.h"
#include "common/base/proc_stats.h"
#include "common/base/sha256.h"
#include "common/base/test_hooks.h"
#include "common/base/trace.h"
#include "common/config/config_file.h"
#include "common/data/validation_split.h"
#include "common/device/device_memory.h"
#include "common/device/out_of_memory.h"
#include "common/layout/pipeline_layout.h"
#include "common/model/digest.h"
#include "common/model/loss.h"
#include "common/model/unet.h"
#include "common/training/stage_optimizer.h"
#include "common/training/stage_parking.h"
#include "ipc/cuda_ipc_channel.h"
#include "ipc/device_budget_segment.h"
#include "ipc/schedule.h"
#include "ipc/shm_ring.h"
#include "launcher/device_lock.h"
#include "launcher/handshake.h"
#include "launcher/progress.h"
#include "launcher/rendezvous.h"
#include "launcher/stage_binary.h"
#include "launcher/stage_link.h"
#include "launcher/stale_runs.h"
#include "launcher/stop_signal.h"
#include "launcher/time_balance.h"

namespace up {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string TurnText(const StageLink& s, int64_t step, const ChainTurn& turn) {
  return s.key + " turn [" + ipc::ActionsText(turn.actions) + "] of step " +
         std::to_string(step + 1);
}

// Every stage's grad norms in the whole model's order (the encoder's half,
// then the decoder's), each stage's placed by the positions its Hello gave;
// those of `stepping` may be missing (0 then): it steps in the turn of its
// last backward and puts its own in.
// Only `replica`'s stages count (the copies' norms are equal: their
// gradients were summed alike).
std::vector<float> AllNorms(const PipelineLayout& layout, const std::vector<StageLink>& stages,
                            const std::vector<std::vector<float>>& norms, int stepping,
                            int replica) {
  size_t half[2] = {0, 0};
  for (const StageLink& s : stages)
    if (s.replica == replica)
      half[layout.stages[static_cast<size_t>(s.stage)].encoder ? 0 : 1] +=
          s.parameter_positions.size();
  std::vector<float> all(half[0] + half[1], 0.0f);
  for (const StageLink& s : stages) {
    if (s.replica != replica) continue;
    const std::vector<float>& own = norms[static_cast<size_t>(s.index)];
    if (s.index == stepping && own.empty()) continue;
    if (own.size() != s.parameter_positions.size()) {
      throw RuntimeError(Str("the ", s.label, " reported ", own.size(), " gradient norms for its ",
                             s.parameter_positions.size(), " parameters"));
    }
    const size_t offset = layout.stages[static_cast<size_t>(s.stage)].encoder ? 0 : half[0];
    for (size_t i = 0; i < own.size(); ++i)
      all[offset + static_cast<size_t>(s.parameter_positions[i])] = own[i];
  }
  return all;
}

// The parts of each half must hold each of its parameters once.
void CheckPositions(const PipelineLayout& layout, const std::vector<StageLink>& stages) {
  for (bool encoder : {true, false}) {
    std::vector<int32_t> all;
    for (const StageLink& s : stages) {
      if (s.replica != 0 || layout.stages[static_cast<size_t>(s.stage)].encoder != encoder)
        continue;
      all.insert(all.end(), s.parameter_positions.begin(), s.parameter_positions.end());
    }
    std::sort(all.begin(), all.end());
    for (size_t i = 0; i < all.size(); ++i) {
      if (all[i] != static_cast<int32_t>(i)) {
        throw RuntimeError(Str("handshake: the ", encoder ? "encoder" : "decoder",
                               " parts do not hold each parameter of the ",
                               encoder ? "encoder" : "decoder", " once (position ", i, ")"));
      }
    }
  }
}

}  // namespace

TrainSummary RunPipeline(const Config& config, RunDir& run,
                         const std::optional<CheckpointRef>& resume, const DebugOutputs& debug,
                         const NodeOptions& nodes) {
  const TrainConfig& t = config.train;
  const PipelineConfig& p = config.pipeline;
  const PipelineLayout layout = ResolveLayout(config);
  const int S = layout.size();
  const int R = p.replicas;  // copies of the S stages: process r*S + s is replica r's stage s
  // Each replica's devices (its slot among its node's replicas) and nodes.
  std::vector<int> slot;
  std::vector<PipelineLayout> replica_layout;  // replica 0's is `layout`
  std::vector<Placement> placements;
  for (int r = 0; r < R; ++r) {
    slot.push_back(R > 1 ? ReplicaSlot(R, nodes.nnodes, r) : 0);
    replica_layout.push_back(slot.back() == 0 ? layout : ResolveLayout(config, slot.back()));
    placements.push_back(ResolveReplicaPlacement(p, replica_layout.back(), nodes, r));
  }
  const Placement& placement = placements[0];
  if (R > 1 && !debug.record_dir.empty()) {
    throw UsageError(Str("--record records one pipeline; pipeline.replicas is ", R,
                         ": record with pipeline.replicas=1"));
  }
  // Devices are checked here, before any process starts.
  std::vector<torch::Device> device;
  for (const StageSpec& s : layout.stages) device.push_back(ParseDevice(s.device, s.device_key));
  const bool all_cuda =
      std::all_of(device.begin(), device.end(), [](const torch::Device& d) { return d.is_cuda(); });
  const bool any_cuda =
      std::any_of(device.begin(), device.end(), [](const torch::Device& d) { return d.is_cuda(); });
  bool parking = false;
  for (const StageSpec& s : layout.stages) {
    bool shared = false;
    for (const StageSpec& o : layout.stages)
      shared =
          shared || (o.index != s.index && placement.lock_key[static_cast<size_t>(o.index)] ==
                                               placement.lock_key[static_cast<size_t>(s.index)]);
    parking = parking ||
              ShouldPark(p.park, device[static_cast<size_t>(s.index)], shared, t.memory_budget > 0);
  }
  const bool prefetch = parking && p.prefetch == "on";
  const bool cuda_ipc = p.transport == "cuda_ipc";
  auto devices_text = [&] {
    std::string out;
    for (const StageSpec& s : layout.stages)
      out += (out.empty() ? "" : ", ") + s.Key() + " " + s.device;
    return out;
  };
  if (p.transport == "nccl" && !all_cuda) {
    throw UsageError("pipeline.transport = nccl: every stage must be on a CUDA device (" +
                     devices_text() + "); use gloo");
  }
  if (p.transport == "nccl") {
    for (const StageChannel& ch : layout.channels) {
      if (placement.lock_key[static_cast<size_t>(ch.from)] !=
          placement.lock_key[static_cast<size_t>(ch.to)])
        continue;
      throw UsageError("pipeline.transport = nccl: the " +
                       layout.stages[static_cast<size_t>(ch.from)].Name() + " and the " +
                       layout.stages[static_cast<size_t>(ch.to)].Name() + " are both on " +
                       layout.stages[static_cast<size_t>(ch.from)].device +
                       "; NCCL joins different GPUs, so on one GPU use cuda_ipc (or shm)");
    }
  }
  if (cuda_ipc && !all_cuda) {
    throw UsageError("pipeline.transport = cuda_ipc: every stage must be on a CUDA device (" +
                     devices_text() + "); use shm");
  }
  if (t.checkpointing != "off") {
    throw UsageError("train.checkpointing = " + t.checkpointing +
                     " is the single-process trainer's; the pipeline recomputes with "
                     "pipeline.activations: recompute (or add --single-process)");
  }
  if (t.offload != "off") {
    throw UsageError("train.offload = " + t.offload +
                     " is the single-process trainer's; the pipeline offloads with "
                     "pipeline.offload: on (or add --single-process)");
  }
  const std::vector<std::string> stage_files = StageFileNames(config);
  if (resume) CheckStageFiles(resume->dir, stage_files);
  const bool lock_on = ResolveLock(p.lock, placement.lock_key, p.schedule);
  const ScheduleKind kind = ParseScheduleKind(p.schedule);
  const bool global_norms = NeedsGlobalNorms(t);
  const std::vector<ChainPhase> phases = ChainSchedule(kind, S, t.micro_batches, global_norms);
  auto where = [&](int s) {
    return nodes.nnodes > 1 ? Str(" (node ", placement.node[static_cast<size_t>(s)], ")")
                            : std::string();
  };
  if (layout.two_stage()) {
    LogInfo(Str("pipeline: encoder on ", device[0].str(), where(0), ", decoder on ",
                device[1].str(), where(1), parking ? " (parking between turns)" : "",
                ", activations ", p.activations));
    LogInfo(Str("pipeline: schedule ", p.schedule, " ", DescribeChainSchedule(phases, {"E", "D"}),
                ", lock ", lock_on ? "on" : "off", ", transport ", p.transport));
  } else {
    std::string parts;
    for (const StageSpec& s : layout.stages)
      parts += Str(parts.empty() ? "" : "; ", s.index, " ", s.Key(), " ", s.LevelsText(), " on ",
                   device[static_cast<size_t>(s.index)].str(), where(s.index));
    LogInfo(Str("pipeline: ", S, " stages: ", parts, parking ? " (parking between turns)" : "",
                ", activations ", p.activations));
    LogInfo(Str("pipeline: schedule ", p.schedule, " ", DescribeChainSchedule(phases), ", lock ",
                lock_on ? "on" : "off", ", transport ", p.transport, ", ", layout.channels.size(),
                " channels"));
  }

  if (R > 1) {
    std::string where_r;
    for (int r = 1; r < R; ++r) {
      std::string on;
      for (const StageSpec& s : replica_layout[static_cast<size_t>(r)].stages) {
        on += (on.empty() ? "" : "/") + s.device +
              (nodes.nnodes > 1
                   ? Str(" (node ",
                         placements[static_cast<size_t>(r)].node[static_cast<size_t>(s.index)], ")")
                   : std::string());
      }
      where_r += Str(", ", r, " on ", on);
    }
    LogInfo(Str("pipeline: ", R, " replicas of the ", S, " stages, each taking ",
                MicroBatchSamples(config) * t.micro_batches, " of each batch's ", t.batch_size,
                " samples; replica 0 as above", where_r, "; gradients summed in replica order (",
                device[0].is_cuda() ? "nccl" : "gloo", ")"));
  }
  const std::string config_path = (fs::path(run.path()) / "config.yaml").string();
  BeginRecording(debug, config);
  std::vector<std::string> keys;
  for (int r = 0; r < R; ++r)
    for (const StageSpec& s : layout.stages) keys.push_back(ReplicaKey(s.Key(), r));
  TraceSession trace(debug, keys);

  // The run's resources, in the order they are released backwards: the
  // socket folder, the rings (removed last), then the processes (killed first).
  for (const std::string& path : RemoveStaleRuns()) {
    LogWarn("removed " + path + ", left behind by a run whose launcher died");
  }
  const ipc::RunId run_id = ipc::RunId::Random();
  const std::string prefix = RunNamePrefix(getpid(), run_id.Hex());
  RunScratchDir sockets(run_id.Hex());
  // A c10d transport meets at a TCPStore; stages on other nodes reach the
  // launcher over TCP, on --master-addr only.
  // Replicas meet there too, one process group per stage (replica_group.h).
  std::optional<Rendezvous> rendezvous;
  if (placement.c10d || R > 1)
    rendezvous.emplace(nodes.store_exists
                           ? Rendezvous::Join(nodes.master_addr, nodes.master_port, p.timeout_s)
                           : Rendezvous::Serve(nodes.master_addr, nodes.master_port, p.timeout_s));
  ipc::ControlListener listener =
      nodes.nnodes > 1 ? ipc::ControlListener::ListenTcp(nodes.master_addr)
                       : ipc::ControlListener::Listen(sockets.path() + "/control.sock");
  // One pair of rings per channel (the shared-memory transports only), each
  // slot sized for the channel's message; each replica has its own.
  auto ring_prefix = [&](int r) { return R > 1 ? Str(prefix, "-r", r) : prefix; };
  std::vector<std::unique_ptr<ipc::ShmRing>> rings;
  for (int r = 0; r < R && !placement.c10d; ++r) {
    for (const StageChannel& ch : layout.channels) {
      std::vector<ipc::TensorSpec> wire_specs;
      for (const WireTensor& w : ch.tensors)
        wire_specs.push_back({w.name, ipc::DType::kFloat32, w.shape});
      const uint64_t slot_bytes = ipc::ShmRing::PayloadBytesFor(wire_specs);
      for (bool forward : {true, false}) {
        rings.push_back(ipc::ShmRing::Create({ChannelRingName(ring_prefix(r), ch, forward), run_id,
                                              static_cast<uint32_t>(t.micro_batches), slot_bytes}));
      }
    }
  }
  // The CPU device the local stages share keeps its tensor total (and the
  // budget, when there is one) in shared memory that each stage charges.
  std::optional<ipc::DeviceBudgetSegment> cpu_budget;
  std::vector<bool> cpu_stage;
  for (int s = 0; s < S; ++s)
    cpu_stage.push_back(!device[static_cast<size_t>(s)].is_cuda() && placement.Local(s, 0));
  if (std::find(cpu_stage.begin(), cpu_stage.end(), true) != cpu_stage.end()) {
    cpu_budget.emplace(ipc::DeviceBudgetSegment::Create(prefix + "-budget", t.memory_budget));
  }
  const std::string config_sha = Sha256Hex(DumpConfig(config));
  if (rendezvous) {  // what the other nodes' launchers start their stages with
    // The cuts first: pipeline.balance: time's are node 0's alone (time_balance.h).
    rendezvous->Set("up/cuts", EncodeCuts(p));
    rendezvous->Set(
        "up/run", RunAnnouncement{run_id.Hex(), listener.endpoint(), config_sha, resume.has_value()}
                      .Encode());
  }

  auto stage_args = [&](const StageSpec& spec, int r) {
    const std::string key = ReplicaKey(spec.Key(), r);
    std::vector<std::string> args{"--config",  config_path,
                                  "--control", listener.endpoint(),
                                  "--run-id",  run_id.Hex(),
                                  "--part",    std::to_string(spec.part + 1),
                                  "--log",     (fs::path(run.path()) / (key + ".log")).string()};
    if (R > 1) {
      args.insert(args.end(), {"--replica", std::to_string(r), "--replica-slot",
                               std::to_string(slot[static_cast<size_t>(r)])});
    }
    if (placement.c10d) args.insert(args.end(), {"--c10d", p.transport});
    if (rendezvous) {
      args.insert(args.end(), {"--store", rendezvous->address(), "--node-addr", nodes.master_addr});
    }
    if (!placement.c10d) args.insert(args.end(), {"--rings", ring_prefix(r)});
    // Every replica starts from replica 0's files (the run keeps one copy).
    if (resume)
      args.insert(args.end(), {"--load", (fs::path(resume->dir) / (spec.Key() + ".pt")).string()});
    if (cpu_budget && cpu_stage[static_cast<size_t>(spec.index)])
      args.insert(args.end(), {"--device-budget", prefix + "-budget"});
    for (std::string& a : StageDebugArgs(debug, key)) args.push_back(std::move(a));
    return args;
  };
  std::vector<StageLink> links;
  for (int r = 0; r < R; ++r) {
    for (const StageSpec& spec : layout.stages) {
      const int s = spec.index;
      StageLink link;
      link.index = r * S + s;
      link.stage = s;
      link.replica = r;
      link.key = ReplicaKey(spec.Key(), r);
      link.label = (spec.parts == 1 ? spec.Name() + " stage" : spec.Name()) +
                   (R > 1 ? Str(" of replica ", r) : "");
      // Each replica takes turns on its own devices.
      const Placement& at = placements[static_cast<size_t>(r)];
      link.device = at.lock_key[static_cast<size_t>(s)] + (r > 0 ? Str("/r", r) : "");
      link.node = at.node[static_cast<size_t>(s)];
      if (at.Local(s, 0)) {
        link.child.emplace(
            ChildProcess::Spawn({link.key,
                                 StageBinary(spec.encoder ? "encoder_proc" : "decoder_proc"),
                                 stage_args(spec, r),
                                 {},
                                 true,
                                 ""}));
        StopSignals::WatchChild(link.child->pid());  // a second Ctrl-C kills them
      }
      links.push_back(std::move(link));
    }
  }
  RemoteExit remote_exit = [&](const StageLink& link) {
    return rendezvous
               ? rendezvous->Get("up/" + run_id.Hex() + "/exit/" + link.key, 2.0).value_or("")
               : std::string();
  };
  TestHookPoint("launcher", "spawn");
  StageGroup stages(std::move(links), remote_exit);
  struct Abort {  // on any error: wake stages blocked on a ring, then kill them
    std::vector<std::unique_ptr<ipc::ShmRing>>& rings;
    StageGroup& stages;
    bool armed = true;
    ~Abort() {
      if (!armed) return;
      for (auto& ring : rings) ring->Abort("the launcher stopped the run");
      stages.KillAll();
    }
  } abort_guard{rings, stages};

  // Handshake: protocol, config and boundary must agree before any work.
  const std::string boundary = BoundarySignature(config);
  const std::vector<ipc::Hello> hellos =
      stages.AcceptAll(listener, After(p.timeout_s),
                       "start-up before step " + std::to_string((resume ? resume->step : 0) + 1));
  for (StageLink& s : stages.all()) {
    const ipc::Hello& h = hellos[static_cast<size_t>(s.index)];
    const std::string problem = HandshakeProblem(h, config_sha, boundary);
    if (!problem.empty()) {
      s.control->Send(ipc::EncodeReject(problem));
      throw UsageError("handshake with the " + s.label + " failed: it " + problem);
    }
    s.parameter_positions = h.parameter_positions;
  }
  CheckPositions(layout, stages.all());
  for (StageLink& s : stages.all()) {
    // A stage on another node gets its stage file over the connection.
    stages.Send(s, ipc::EncodeWelcome(s.remote() && resume), "start-up");
    if (s.remote() && resume) {  // replica 0's file, for every replica
      const std::string file = layout.stages[static_cast<size_t>(s.stage)].Key() + ".pt";
      ipc::SendFile(*s.control, (fs::path(resume->dir) / file).string());
    }
  }
  {
    std::string up;
    for (const StageLink& s : stages.all())
      up += Str(up.empty() ? "" : ", ", s.key, " pid ", hellos[static_cast<size_t>(s.index)].pid,
                nodes.nnodes > 1 ? Str(" (node ", s.node, ")") : std::string());
    LogInfo(Str("run id ", run_id.Hex(), "; stages up: ", up));
  }

  DeviceLocks locks(lock_on);
  // Each device's total, all its stages together, after each turn: the turn's
  // own peak plus what the other stages on it hold (their residue while parked).
  std::map<std::string, int64_t> device_peak;
  const auto note_device_total = [&](StageLink& active, const std::string& during) {
    int64_t total = active.turn_peak_tensor_bytes;
    std::string others;
    for (StageLink& o : stages.all()) {
      if (&o == &active || o.device != active.device) continue;
      total += o.tensor_bytes;
      others += Str(", the ", o.label, " holding ", FormatBytes(o.tensor_bytes));
    }
    int64_t& peak = device_peak[active.device];
    peak = std::max(peak, total);
    // A CPU device enforces the budget as it allocates; on CUDA each process's
    // cap is the whole budget, so the stages' sum is checked here, a turn at a time.
    if (device[static_cast<size_t>(active.stage)].is_cuda() && t.memory_budget > 0 &&
        total > t.memory_budget) {
      throw RuntimeError(Str(
          "out of memory on ", active.device, " during ", during, ": the ", active.label,
          "'s turn peaked at ", FormatBytes(active.turn_peak_tensor_bytes), others, ", past the ",
          FormatBytes(t.memory_budget), " train.memory_budget; ", FitSuggestions(config, false)));
    }
  };
  // Runs the phases of `list` for step `step` in the first `replicas` copies
  // of the pipeline at once (each copy's turns are the schedule's): grants
  // each turn (the device lock), lets the next phase's parked stage
  // prefetch, and folds each report into the stage's figures before handing
  // it to `on_report`.
  const size_t P = static_cast<size_t>(R * S);  // processes
  std::vector<std::vector<float>> norms(P);     // this step's, per process
  std::vector<double> held_s(P, 0.0);           // time each process held its turns
  const auto run_phases = [&](int64_t step, const std::vector<ChainPhase>& list, int replicas,
                              const std::function<void(int, const ipc::TurnReport&)>& on_report) {
    std::vector<int64_t> turn_start_us(P, 0);
    std::vector<std::string> turn_text(P);
    for (size_t k = 0; k < list.size(); ++k) {
      const ChainPhase& phase = list[k];
      std::vector<int> waiting;
      std::string doing;
      for (int r = 0; r < replicas; ++r) {
        for (const ChainTurn& turn : phase.turns) {
          const int id = r * S + turn.stage;
          StageLink& s = stages[id];
          const std::string text = TurnText(s, step, turn);
          bool acquired;
          {
            TraceSpan lock_wait(trace_event::kLockWait, "lock");
            acquired = locks.TryAcquire(s.device, id);
          }
          if (!acquired)
            throw RuntimeError("schedule error: " + s.device + " is held while granting " + text);
          ipc::TurnRequest req{step, turn.actions, {}};
          const bool steps =
              std::any_of(turn.actions.begin(), turn.actions.end(),
                          [](const ipc::Action& a) { return a.op == ipc::Op::kStep; });
          if (steps && global_norms) req.all_norms = AllNorms(layout, stages.all(), norms, id, r);
          LogDebug(Str(s.device, " -> ", text));
          // The turn starts when granted: a stage may begin before Send returns.
          turn_start_us[static_cast<size_t>(id)] = MonotonicMicros();
          stages.Send(s, ipc::Encode(req), text);
          TestHookPoint("launcher", "turn", step + 1);
          turn_text[static_cast<size_t>(id)] = text;
          s.turn = text;
          waiting.push_back(id);
          if (!doing.empty()) doing += ", ";
          doing += text;
        }
      }
      // pipeline.prefetch: the next phase's parked stage starts loading its
      // state now, while this phase computes.
      if (prefetch && k + 1 < list.size()) {
        for (int r = 0; r < replicas; ++r) {
          for (const ChainTurn& next : list[k + 1].turns) {
            const int id = r * S + next.stage;
            if (std::find(waiting.begin(), waiting.end(), id) == waiting.end())
              stages.Send(stages[id], ipc::EncodePrefetch(), doing);
          }
        }
      }
      const auto phase_start = Clock::now();
      while (!waiting.empty()) {
        auto [id, m] = stages.Await(waiting, After(p.timeout_s), doing);
        const ipc::TurnReport report = ipc::DecodeTurnDone(m);
        StageLink& s = stages[id];
        s.turn.clear();
        const size_t i = static_cast<size_t>(id);
        locks.Release(s.device, id);
        TraceComplete(std::string(trace_event::kTurnHeld) + ": " + turn_text[i], "turn",
                      turn_start_us[i], MonotonicMicros());
        waiting.erase(std::find(waiting.begin(), waiting.end(), id));
        s.busy_s += report.busy_s;
        s.rss_bytes = report.rss_bytes;
        s.device_peak_bytes = std::max(s.device_peak_bytes, report.device_peak_bytes);
        s.tensor_bytes = report.tensor_bytes;
        s.peak_tensor_bytes = std::max(s.peak_tensor_bytes, report.turn_peak_tensor_bytes);
        s.turn_peak_tensor_bytes = report.turn_peak_tensor_bytes;
        s.residue_tensor_bytes = std::max(s.residue_tensor_bytes, report.tensor_bytes);
        s.compute_peak_tensor_bytes =
            std::max(s.compute_peak_tensor_bytes, report.compute_peak_tensor_bytes);
        s.step_peak_tensor_bytes =
            std::max(s.step_peak_tensor_bytes, report.step_peak_tensor_bytes);
        note_device_total(s, turn_text[i]);
        held_s[i] += std::chrono::duration<double>(Clock::now() - phase_start).count();
        if (!report.norms.empty()) norms[i] = report.norms;
        on_report(id, report);
      }
    }
  };

  const std::unique_ptr<ValidationSet> validation = MakeValidationSet(config);
  const int64_t start = resume ? resume->step : 0;
  Progress progress("pipeline", t.steps);
  SkipWatch skips;
  TrainSummary summary;
  if (resume) summary.best = RecallBestValidation(run.path());  // best stays best
  const auto wall_start = Clock::now();
  int64_t completed = start;
  for (int64_t step = start; step < t.steps; ++step) {
    const auto step_start = Clock::now();
    for (auto& n : norms) n.clear();
    std::fill(held_s.begin(), held_s.end(), 0.0);
    double loss = 0;
    DiceCounter dice(config.model);
    std::vector<std::optional<ipc::TurnReport>> stepped(P);  // fp16
    double data_wait_s = 0;
    // The loss and Dice over every replica: each micro-batch's loss is
    // already scaled by 1 / (micro_batches x replicas).
    run_phases(step, phases, R, [&](int id, const ipc::TurnReport& report) {
      data_wait_s += report.data_wait_s;
      if (!report.dice_counts.empty()) dice.AddCounts(report.dice_counts);
      if (report.loss_scale > 0) stepped[static_cast<size_t>(id)] = report;
      loss += report.loss;
    });
    const std::vector<double> step_held_s = held_s;  // before any validation
    const double step_s = std::chrono::duration<double>(Clock::now() - step_start).count();
    std::optional<Fp16Record> fp16;
    if (t.precision == "fp16") {
      const auto& last = stepped.back();
      std::string outcomes;
      bool agree = true;
      for (int s = 0; s < static_cast<int>(P); ++s) {
        const auto& o = stepped[static_cast<size_t>(s)];
        outcomes += Str(s ? ", " : "", stages[s].key, " ",
                        o ? Str("scale ", o->loss_scale, o->skipped ? " skipped" : "")
                          : std::string("no step"));
        agree =
            agree && o && last && o->loss_scale == last->loss_scale && o->skipped == last->skipped;
      }
      if (!agree)
        throw RuntimeError(Str("fp16: the stages disagree on step ", step + 1, ": ", outcomes));
      fp16 = skips.Note(step, last->loss_scale, last->skipped);
    }
    const StepEnd end = DecideStepEnd(config, step);
    std::optional<ValidationRecord> val;
    bool best = false;
    if (end.validate) {  // through replica 0's stages, the training state untouched
      const auto val_start = Clock::now();
      std::vector<std::vector<int64_t>> cases;
      run_phases(step,
                 ChainValidationSchedule(static_cast<int64_t>(validation->plan.size()),
                                         t.micro_batches, !lock_on, S),
                 1, [&](int, const ipc::TurnReport& report) {
                   if (report.val_cases == 0) return;
                   const size_t per_case = report.val_counts.size() / report.val_cases;
                   for (size_t c = 0; c < static_cast<size_t>(report.val_cases); ++c)
                     cases.emplace_back(report.val_counts.begin() + c * per_case,
                                        report.val_counts.begin() + (c + 1) * per_case);
                 });
      if (static_cast<int64_t>(cases.size()) != validation->cases->size()) {
        throw RuntimeError(Str("validation after step ", step + 1, ": the ", stages[S - 1].label,
                               " scored ", cases.size(), " of ", validation->cases->size(),
                               " cases"));
      }
      val = FinishValidation(cases, validation->entries, step,
                             std::chrono::duration<double>(Clock::now() - val_start).count(),
                             &summary, &best);
      progress.Validated(val->scores.mean);
    }
    AppendStepMetrics(run, t, step, loss, dice.Mean(), step_s, data_wait_s, fp16,
                      val ? &*val : nullptr);
    std::string turns = lock_on ? "device turns:" : "busy:", rss = "  rss:", peak, tensors;
    for (const StageLink& s : stages.all()) {
      const size_t i = static_cast<size_t>(s.index);
      turns += Str(" ", s.key, " ", static_cast<int>(100 * step_held_s[i] / step_s + 0.5), "%");
      rss += Str(" ", s.key, " ", static_cast<int64_t>(s.rss_bytes / 1048576.0 + 0.5), " MiB");
      peak += Str(" ", s.key, " ", s.device_peak_bytes >> 20, " MiB");
      tensors += Str(" ", s.key, " ", s.tensor_bytes >> 20, "/", s.peak_tensor_bytes >> 20, " MiB");
    }
    progress.Step(step + 1, loss, dice.Mean(), t.batch_size / step_s,
                  turns + rss + (any_cuda ? "  device peak:" + peak : std::string()) +
                      "  tensors:" + tensors + " (live/peak)");
    summary.final_loss = loss;

    if (end.checkpoint || best) {  // replica 0 writes the run's one copy
      const std::string doing = "checkpoint of step " + std::to_string(step + 1);
      const std::string staging = BeginCheckpoint(run.path(), step + 1);
      StagingCleanup unless_committed(staging);
      for (StageLink& s : stages.all()) {
        if (s.replica != 0) continue;
        stages.Send(
            s,
            ipc::Encode(ipc::SaveRequest{step + 1, (fs::path(staging) / (s.key + ".pt")).string()}),
            doing);
      }
      std::vector<int> waiting;
      for (int s = 0; s < S; ++s) waiting.push_back(s);
      std::vector<std::string> received(static_cast<size_t>(S));  // stage files from other nodes
      while (!waiting.empty()) {
        auto [id, m] = stages.Await(waiting, After(p.timeout_s), doing);
        if (m.type == static_cast<uint32_t>(ipc::MsgType::kFileChunk) && stages[id].remote()) {
          const ipc::FileChunk chunk = ipc::DecodeFileChunk(m);
          std::string& bytes = received[static_cast<size_t>(id)];
          bytes += chunk.bytes;
          if (chunk.last) {
            WriteFileAtomic((fs::path(staging) / (stages[id].key + ".pt")).string(), bytes);
            bytes.clear();
          }
          continue;
        }
        ipc::ExpectType(m, ipc::MsgType::kSaved, stages[id].label);
        waiting.erase(std::find(waiting.begin(), waiting.end(), id));
      }
      TestHookPoint("launcher", "save", step + 1);
      CommitCheckpoint(run.path(), staging, step + 1, stage_files, config);
    }
    if (best) KeepBestCheckpoint(run.path(), step + 1);
    completed = step + 1;
    if (end.stopping) {
      WarnStopped(completed, run);
      break;
    }
  }
  summary.wall_s = std::chrono::duration<double>(Clock::now() - wall_start).count();

  // Orderly shutdown: Finish -> Bye (peak RSS) -> exit 0.
  const std::string shutdown = "shutdown after step " + std::to_string(completed);
  for (StageLink& s : stages.all()) stages.Send(s, ipc::EncodeFinish(), shutdown);
  TestHookPoint("launcher", "finish");
  std::vector<int> waiting;
  for (int s = 0; s < static_cast<int>(P); ++s) waiting.push_back(s);
  while (!waiting.empty()) {
    auto [id, m] = stages.Await(waiting, After(p.timeout_s), shutdown);
    ipc::ExpectType(m, ipc::MsgType::kBye, stages[id].label);
    const ipc::ByeReport bye = ipc::DecodeBye(m);
    StageLink& s = stages[id];
    s.peak_rss_bytes = bye.peak_rss_bytes;
    s.device_peak_bytes = std::max(s.device_peak_bytes, bye.device_peak_bytes);
    s.peak_tensor_bytes = std::max(s.peak_tensor_bytes, bye.peak_tensor_bytes);
    s.peak_reserved_bytes = bye.peak_reserved_bytes;
    s.finished = true;
    waiting.erase(std::find(waiting.begin(), waiting.end(), id));
  }
  for (StageLink& s : stages.all()) {
    if (s.remote()) continue;  // its node's launcher waits for it
    const ExitStatus status = s.child->Wait(After(p.timeout_s));
    if (!status.success()) throw RuntimeError(s.label + " " + status.Describe() + " at shutdown");
    s.peak_rss_bytes = std::max(s.peak_rss_bytes, s.child->peak_rss_bytes());
  }
  abort_guard.armed = false;
  FinishRecording(debug, config);
  trace.Merge();

  // The digest comes from the final checkpoint the stages wrote.
  const fs::path final_dir =
      fs::path(run.path()) / "checkpoints" / ("step-" + std::to_string(completed));
  UNetEncoder enc(config.model, 0);
  UNetDecoder dec(config.model, 0, t.deep_supervision);
  LoadWholeModel(config, final_dir.string(), *enc, *dec);
  summary.param_digest = ParamDigest(NamedState(*enc), NamedState(*dec));
  summary.SetThroughput(start, completed, t.batch_size);

  std::vector<ProcessFigures> processes(1);
  processes[0].name = "launcher";
  processes[0].peak_rss_bytes = PeakRssBytes();
  for (StageLink& s : stages.all()) {
    processes.push_back({s.key, s.peak_rss_bytes, s.device_peak_bytes, s.busy_s,
                         s.peak_tensor_bytes,
                         device[static_cast<size_t>(s.stage)].is_cuda()
                             ? std::optional<int64_t>(s.peak_reserved_bytes)
                             : std::nullopt,
                         s.residue_tensor_bytes,
                         PhasePeaks{s.compute_peak_tensor_bytes, s.step_peak_tensor_bytes}});
  }
  std::vector<DevicePeak> devices;
  for (const auto& [key, peak] : device_peak) {
    bool shared_cpu = false;
    for (int s = 0; s < S; ++s)
      shared_cpu = shared_cpu ||
                   (cpu_budget && cpu_stage[static_cast<size_t>(s)] && stages[s].device == key);
    devices.push_back({key, shared_cpu ? cpu_budget->get()->peak.load() : peak});
  }
  JsonWriter own;
  own.Field("schedule", p.schedule)
      .Field("transport", p.transport)
      .Field("nnodes", nodes.nnodes)
      .Field("stages", S)
      .Field("replicas", R)
      .Field("run_id", run_id.Hex());
  WriteRunSummary(run, "pipeline", own, summary, processes, devices, t.memory_budget);
  return summary;
}

}  // namespace up
