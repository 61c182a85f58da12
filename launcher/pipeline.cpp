// See pipeline.h.
#include "launcher/pipeline.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>

#include "common/byte_size.h"
#include "common/data/validation_split.h"
#include "common/deadline.h"
#include "common/errors.h"
#include "common/fs_util.h"
#include "common/json_writer.h"
#include "common/logging.h"
#include "common/model/device_memory.h"
#include "common/model/digest.h"
#include "common/model/loss.h"
#include "common/model/out_of_memory.h"
#include "common/model/stage_optimizer.h"
#include "common/model/stage_parking.h"
#include "common/model/unet.h"
#include "common/proc_stats.h"
#include "common/sha256.h"
#include "common/test_hooks.h"
#include "common/trace.h"
#include "ipc/cuda_ipc_channel.h"
#include "ipc/device_budget_segment.h"
#include "ipc/shm_ring.h"
#include "launcher/device_lock.h"
#include "launcher/handshake.h"
#include "launcher/progress.h"
#include "launcher/rendezvous.h"
#include "launcher/stage_binary.h"
#include "launcher/stage_link.h"
#include "launcher/stale_runs.h"
#include "launcher/stop_signal.h"

namespace up {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Loads a stage file's weights into `module` (for the digest).
template <typename Module>
NamedTensors LoadWeights(const std::string& path, Module& module, const TrainConfig& train) {
  StageOptimizer scratch(*module, train);
  LoadStageFile(path, *module, scratch.optimizer());
  return NamedState(*module);
}

std::string TurnText(int64_t step, const Turn& turn) {
  return std::string(StageName(turn.stage)) + " turn [" + ipc::ActionsText(turn.actions) +
         "] of step " + std::to_string(step + 1);
}

}  // namespace

TrainSummary RunPipeline(const Config& config, RunDir& run,
                         const std::optional<CheckpointRef>& resume, const DebugOutputs& debug,
                         const NodeOptions& nodes) {
  const TrainConfig& t = config.train;
  const PipelineConfig& p = config.pipeline;
  const Placement placement = ResolvePlacement(p, nodes);
  // Devices are checked here, before any process starts.
  const torch::Device enc_device = ParseDevice(p.encoder.device, "pipeline.stages.encoder.device");
  const torch::Device dec_device = ParseDevice(p.decoder.device, "pipeline.stages.decoder.device");
  const bool parking = ShouldPark(p.park, enc_device, dec_device, t.memory_budget > 0);
  const bool prefetch = parking && p.prefetch == "on";
  const bool cuda_ipc = p.transport == "cuda_ipc";
  if (p.transport == "nccl" && (!enc_device.is_cuda() || !dec_device.is_cuda())) {
    throw UsageError("pipeline.transport = nccl: both stages must be on CUDA devices (encoder " +
                     p.encoder.device + ", decoder " + p.decoder.device + "); use gloo");
  }
  if (p.transport == "nccl" && placement.node[0] == placement.node[1] &&
      std::max<int>(enc_device.index(), 0) == std::max<int>(dec_device.index(), 0)) {
    throw UsageError("pipeline.transport = nccl: both stages are on " + p.encoder.device +
                     "; NCCL joins different GPUs, so on one GPU use cuda_ipc (or shm)");
  }
  if (cuda_ipc && (!enc_device.is_cuda() || !dec_device.is_cuda())) {
    throw UsageError(
        "pipeline.transport = cuda_ipc: both stages must be on CUDA devices (encoder " +
        p.encoder.device + ", decoder " + p.decoder.device + "); use shm");
  }
  if (t.checkpointing != "off") {
    throw UsageError("train.checkpointing = " + t.checkpointing +
                     " is the single-process trainer's; the pipeline recomputes with "
                     "pipeline.activations: recompute (or add --single-process)");
  }
  const bool lock_on =
      ResolveLock(p.lock, placement.lock_key[0], placement.lock_key[1], p.schedule);
  const ScheduleKind kind = ParseScheduleKind(p.schedule);
  const bool global_norms = NeedsGlobalNorms(t);
  const std::vector<Phase> phases = StepSchedule(kind, t.micro_batches, global_norms);
  auto where = [&](int s) {
    return nodes.nnodes > 1 ? Str(" (node ", placement.node[s], ")") : std::string();
  };
  LogInfo(Str("pipeline: encoder on ", enc_device.str(), where(0), ", decoder on ",
              dec_device.str(), where(1), parking ? " (parking between turns)" : "",
              ", activations ", p.activations));
  LogInfo(Str("pipeline: schedule ", p.schedule, " ", DescribeSchedule(phases), ", lock ",
              lock_on ? "on" : "off", ", transport ", p.transport));

  const std::string stage_bin[2] = {
      placement.Local(0, 0) ? StageBinary("encoder_proc") : std::string(),
      placement.Local(1, 0) ? StageBinary("decoder_proc") : std::string()};
  const std::string config_path = (fs::path(run.path()) / "config.yaml").string();
  BeginRecording(debug, config);
  TraceSession trace(debug);

  // The run's resources, in the order they are released backwards: the
  // socket folder, the rings (removed last), then the processes (killed first).
  for (const std::string& path : RemoveStaleRuns()) {
    LogWarn("removed " + path + ", left behind by a run whose launcher died");
  }
  const ipc::RunId run_id = ipc::RunId::Random();
  RunScratchDir sockets(run_id.Hex());
  // A c10d transport meets at a TCPStore; stages on other nodes reach the
  // launcher over TCP, on --master-addr only.
  std::optional<Rendezvous> rendezvous;
  if (placement.c10d)
    rendezvous.emplace(Rendezvous::Serve(nodes.master_addr, nodes.master_port, p.timeout_s));
  ipc::ControlListener listener =
      nodes.nnodes > 1 ? ipc::ControlListener::ListenTcp(nodes.master_addr)
                       : ipc::ControlListener::Listen(sockets.path() + "/control.sock");
  const BoundarySpec spec =
      BoundaryShapes(config.model, config.data.size, t.batch_size / t.micro_batches);
  std::vector<ipc::TensorSpec> wire_specs;
  for (size_t i = 0; i < spec.names.size(); ++i)
    wire_specs.push_back({spec.names[i], ipc::DType::kFloat32, spec.shapes[i]});
  const uint64_t slot_bytes = ipc::ShmRing::PayloadBytesFor(wire_specs);
  const std::string fwd_name = RunNamePrefix(getpid(), run_id.Hex()) + "-fwd";
  const std::string bwd_name = RunNamePrefix(getpid(), run_id.Hex()) + "-bwd";
  std::unique_ptr<ipc::ShmRing> fwd, bwd;  // the shared-memory transports only
  if (!placement.c10d) {
    fwd = ipc::ShmRing::Create(
        {fwd_name, run_id, static_cast<uint32_t>(t.micro_batches), slot_bytes});
    bwd = ipc::ShmRing::Create(
        {bwd_name, run_id, static_cast<uint32_t>(t.micro_batches), slot_bytes});
  }
  // The CPU device the local stages share keeps its tensor total (and the
  // budget, when there is one) in shared memory that each stage charges.
  std::optional<ipc::DeviceBudgetSegment> cpu_budget;
  const bool cpu_stage[2] = {!enc_device.is_cuda() && placement.Local(0, 0),
                             !dec_device.is_cuda() && placement.Local(1, 0)};
  if (cpu_stage[0] || cpu_stage[1]) {
    cpu_budget.emplace(ipc::DeviceBudgetSegment::Create(
        RunNamePrefix(getpid(), run_id.Hex()) + "-budget", t.memory_budget));
  }
  const std::string config_sha = Sha256Hex(DumpConfig(config));
  if (rendezvous) {  // what the other node's launcher starts its stage with
    rendezvous->Set(
        "up/run", RunAnnouncement{run_id.Hex(), listener.endpoint(), config_sha, resume.has_value()}
                      .Encode());
  }

  auto stage_args = [&](const std::string& name, const std::string& send, const std::string& recv) {
    std::vector<std::string> args{
        "--config", config_path,  "--control", listener.endpoint(),
        "--run-id", run_id.Hex(), "--log",     (fs::path(run.path()) / (name + ".log")).string()};
    if (rendezvous) {
      args.insert(args.end(), {"--c10d", p.transport, "--store", rendezvous->address(),
                               "--node-addr", nodes.master_addr});
    } else {
      args.insert(args.end(), {"--send-ring", send, "--recv-ring", recv});
    }
    if (resume)
      args.insert(args.end(), {"--load", (fs::path(resume->dir) / (name + ".pt")).string()});
    if (cpu_budget && cpu_stage[name == "encoder" ? 0 : 1])
      args.insert(args.end(),
                  {"--device-budget", RunNamePrefix(getpid(), run_id.Hex()) + "-budget"});
    for (std::string& a : StageDebugArgs(debug, name)) args.push_back(std::move(a));
    return args;
  };
  std::vector<StageLink> links;
  for (StageId id : {StageId::kEncoder, StageId::kDecoder}) {
    const int s = static_cast<int>(id);
    const std::string name = StageName(id);
    StageLink link{id, placement.lock_key[s], std::nullopt, placement.node[s], std::nullopt};
    if (placement.Local(s, 0)) {
      link.child.emplace(ChildProcess::Spawn(
          {name,
           stage_bin[s],
           s == 0 ? stage_args(name, fwd_name, bwd_name) : stage_args(name, bwd_name, fwd_name),
           {},
           true,
           ""}));
      StopSignals::WatchChild(link.child->pid());  // a second Ctrl-C kills them
    }
    links.push_back(std::move(link));
  }
  RemoteExit remote_exit = [&](const StageLink& link) {
    return rendezvous
               ? rendezvous->Get("up/" + run_id.Hex() + "/exit/" + link.name(), 2.0).value_or("")
               : std::string();
  };
  TestHookPoint("launcher", "spawn");
  StageGroup stages(std::move(links), remote_exit);
  struct Abort {  // on any error: wake stages blocked on a ring, then kill them
    ipc::ShmRing* fwd;
    ipc::ShmRing* bwd;
    StageGroup& stages;
    bool armed = true;
    ~Abort() {
      if (!armed) return;
      if (fwd) fwd->Abort("the launcher stopped the run");
      if (bwd) bwd->Abort("the launcher stopped the run");
      stages.KillAll();
    }
  } abort_guard{fwd.get(), bwd.get(), stages};

  // Handshake: protocol, config and boundary must agree before any work.
  const std::string boundary = BoundarySignature(config);
  const std::vector<ipc::Hello> hellos =
      stages.AcceptAll(listener, After(p.timeout_s),
                       "start-up before step " + std::to_string((resume ? resume->step : 0) + 1));
  for (StageLink& s : stages.all()) {
    const ipc::Hello& h = hellos[static_cast<int>(s.id)];
    const std::string problem = HandshakeProblem(h, config_sha, boundary);
    if (!problem.empty()) {
      s.control->Send(ipc::EncodeReject(problem));
      throw UsageError(std::string("handshake with the ") + s.name() + " stage failed: it " +
                       problem);
    }
  }
  for (StageLink& s : stages.all()) {
    // A stage on another node gets its stage file over the connection.
    stages.Send(s, ipc::EncodeWelcome(s.remote() && resume), "start-up");
    if (s.remote() && resume) {
      ipc::SendFile(*s.control, (fs::path(resume->dir) / (std::string(s.name()) + ".pt")).string());
    }
  }
  LogInfo(Str("run id ", run_id.Hex(), "; stages up: encoder pid ", hellos[0].pid, where(0),
              ", decoder pid ", hellos[1].pid, where(1)));

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
      others += Str(", the ", o.name(), " stage holding ", FormatBytes(o.tensor_bytes));
    }
    int64_t& peak = device_peak[active.device];
    peak = std::max(peak, total);
    // A CPU device enforces the budget as it allocates; on CUDA each process's
    // cap is the whole budget, so the stages' sum is checked here, a turn at a time.
    const bool cuda = (active.id == StageId::kEncoder ? enc_device : dec_device).is_cuda();
    if (cuda && t.memory_budget > 0 && total > t.memory_budget) {
      throw RuntimeError(Str("out of memory on ", active.device, " during ", during, ": the ",
                             active.name(), " stage's turn peaked at ",
                             FormatBytes(active.turn_peak_tensor_bytes), others, ", past the ",
                             FormatBytes(t.memory_budget), " train.memory_budget; ",
                             FitSuggestions(config, false)));
    }
  };
  // Runs the phases of `list` for step `step`: grants each turn (the device
  // lock), lets the next phase's parked stage prefetch, and folds each report
  // into the stage's figures before handing it to `on_report`.
  std::vector<float> norms[2];  // the step's grad norms per stage, for the other's S
  double held_s[2] = {0, 0};    // time each stage held its turns this step
  const auto run_phases =
      [&](int64_t step, const std::vector<Phase>& list,
          const std::function<void(StageId, const ipc::TurnReport&)>& on_report) {
        int64_t turn_start_us[2] = {0, 0};
        std::string turn_text[2];
        for (size_t k = 0; k < list.size(); ++k) {
          const Phase& phase = list[k];
          std::vector<StageId> waiting;
          std::string doing;
          for (const Turn& turn : phase.turns) {
            StageLink& s = stages[turn.stage];
            bool acquired;
            {
              TraceSpan lock_wait(trace_event::kLockWait, "lock");
              acquired = locks.TryAcquire(s.device, turn.stage);
            }
            if (!acquired) {
              throw RuntimeError(std::string("schedule error: ") + s.device +
                                 " is held while granting " + TurnText(step, turn));
            }
            ipc::TurnRequest req{step, turn.actions, {}};
            const bool steps =
                std::any_of(turn.actions.begin(), turn.actions.end(),
                            [](const ipc::Action& a) { return a.op == ipc::Op::kStep; });
            if (steps && global_norms) req.peer_norms = norms[1 - static_cast<int>(turn.stage)];
            LogDebug(Str(s.device, " -> ", TurnText(step, turn)));
            // The turn starts when granted: a stage may begin before Send returns.
            turn_start_us[static_cast<int>(turn.stage)] = MonotonicMicros();
            stages.Send(s, ipc::Encode(req), TurnText(step, turn));
            TestHookPoint("launcher", "turn", step + 1);
            turn_text[static_cast<int>(turn.stage)] = TurnText(step, turn);
            waiting.push_back(turn.stage);
            if (!doing.empty()) doing += ", ";
            doing += TurnText(step, turn);
          }
          // pipeline.prefetch: the next phase's parked stage starts loading its
          // state now, while this phase computes.
          if (prefetch && k + 1 < list.size()) {
            for (const Turn& next : list[k + 1].turns) {
              if (std::find(waiting.begin(), waiting.end(), next.stage) == waiting.end())
                stages.Send(stages[next.stage], ipc::EncodePrefetch(), doing);
            }
          }
          const auto phase_start = Clock::now();
          while (!waiting.empty()) {
            auto [id, m] = stages.Await(waiting, After(p.timeout_s), doing);
            const ipc::TurnReport report = ipc::DecodeTurnDone(m);
            StageLink& s = stages[id];
            locks.Release(s.device, id);
            TraceComplete(
                std::string(trace_event::kTurnHeld) + ": " + turn_text[static_cast<int>(id)],
                "turn", turn_start_us[static_cast<int>(id)], MonotonicMicros());
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
            note_device_total(s, turn_text[static_cast<int>(id)]);
            held_s[static_cast<int>(id)] +=
                std::chrono::duration<double>(Clock::now() - phase_start).count();
            if (!report.norms.empty()) norms[static_cast<int>(id)] = report.norms;
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
    norms[0].clear();
    norms[1].clear();
    held_s[0] = held_s[1] = 0;
    double loss = 0;
    DiceCounter dice(config.model.num_classes);
    std::optional<ipc::TurnReport> stepped[2];  // fp16: each stage's step outcome
    double data_wait_s = 0;
    run_phases(step, phases, [&](StageId id, const ipc::TurnReport& report) {
      data_wait_s += report.data_wait_s;
      if (!report.dice_counts.empty()) dice.AddCounts(report.dice_counts);
      if (report.loss_scale > 0) stepped[static_cast<int>(id)] = report;
      loss += report.loss;
    });
    const double step_held_s[2] = {held_s[0], held_s[1]};  // before any validation
    const double step_s = std::chrono::duration<double>(Clock::now() - step_start).count();
    std::optional<Fp16Record> fp16;
    if (t.precision == "fp16") {
      const auto& e = stepped[0];
      const auto& d = stepped[1];
      if (!e || !d || e->loss_scale != d->loss_scale || e->skipped != d->skipped) {
        throw RuntimeError(Str(
            "fp16: the stages disagree on step ", step + 1, ": encoder ",
            e ? Str("scale ", e->loss_scale, e->skipped ? " skipped" : "") : std::string("no step"),
            ", decoder ",
            d ? Str("scale ", d->loss_scale, d->skipped ? " skipped" : "")
              : std::string("no step")));
      }
      fp16 = skips.Note(step, d->loss_scale, d->skipped);
    }
    const StepEnd end = DecideStepEnd(config, step);
    std::optional<ValidationRecord> val;
    bool best = false;
    if (end.validate) {  // through the stages, the training state untouched
      const auto val_start = Clock::now();
      std::vector<std::vector<int64_t>> cases;
      run_phases(step,
                 ValidationSchedule(static_cast<int64_t>(validation->plan.size()), t.micro_batches,
                                    !lock_on),
                 [&](StageId, const ipc::TurnReport& report) {
                   if (report.val_cases == 0) return;
                   const size_t per_case = report.val_counts.size() / report.val_cases;
                   for (size_t c = 0; c < static_cast<size_t>(report.val_cases); ++c)
                     cases.emplace_back(report.val_counts.begin() + c * per_case,
                                        report.val_counts.begin() + (c + 1) * per_case);
                 });
      if (static_cast<int64_t>(cases.size()) != validation->cases->size()) {
        throw RuntimeError(Str("validation after step ", step + 1, ": the decoder scored ",
                               cases.size(), " of ", validation->cases->size(), " cases"));
      }
      val = FinishValidation(cases, validation->entries, step,
                             std::chrono::duration<double>(Clock::now() - val_start).count(),
                             &summary, &best);
      progress.Validated(val->scores.mean);
    }
    AppendStepMetrics(run, t, step, loss, dice.Mean(), step_s, data_wait_s, fp16,
                      val ? &*val : nullptr);
    char turns[192];
    const StageLink& e = stages[StageId::kEncoder];
    const StageLink& d = stages[StageId::kDecoder];
    std::snprintf(turns, sizeof(turns),
                  "%s: encoder %.0f%% decoder %.0f%%  rss: encoder %.0f MiB decoder %.0f MiB%s",
                  lock_on ? "device turns" : "busy", 100 * step_held_s[0] / step_s,
                  100 * step_held_s[1] / step_s, e.rss_bytes / 1048576.0, d.rss_bytes / 1048576.0,
                  enc_device.is_cuda() || dec_device.is_cuda()
                      ? Str("  device peak: encoder ", e.device_peak_bytes >> 20, " MiB decoder ",
                            d.device_peak_bytes >> 20, " MiB")
                            .c_str()
                      : "");
    progress.Step(step + 1, loss, dice.Mean(), t.batch_size / step_s,
                  Str(turns, "  tensors: encoder ", e.tensor_bytes >> 20, "/",
                      e.peak_tensor_bytes >> 20, " MiB decoder ", d.tensor_bytes >> 20, "/",
                      d.peak_tensor_bytes >> 20, " MiB (live/peak)"));
    summary.final_loss = loss;

    if (end.checkpoint || best) {
      const std::string doing = "checkpoint of step " + std::to_string(step + 1);
      const std::string staging = BeginCheckpoint(run.path(), step + 1);
      StagingCleanup unless_committed(staging);
      for (StageLink& s : stages.all()) {
        stages.Send(s,
                    ipc::Encode(ipc::SaveRequest{
                        step + 1, (fs::path(staging) / (std::string(s.name()) + ".pt")).string()}),
                    doing);
      }
      std::vector<StageId> waiting{StageId::kEncoder, StageId::kDecoder};
      std::string received[2];  // stage files arriving from other nodes
      while (!waiting.empty()) {
        auto [id, m] = stages.Await(waiting, After(p.timeout_s), doing);
        if (m.type == static_cast<uint32_t>(ipc::MsgType::kFileChunk) && stages[id].remote()) {
          const ipc::FileChunk chunk = ipc::DecodeFileChunk(m);
          received[static_cast<int>(id)] += chunk.bytes;
          if (chunk.last) {
            WriteFileAtomic((fs::path(staging) / (std::string(StageName(id)) + ".pt")).string(),
                            received[static_cast<int>(id)]);
          }
          continue;
        }
        ipc::ExpectType(m, ipc::MsgType::kSaved, StageName(id));
        waiting.erase(std::find(waiting.begin(), waiting.end(), id));
      }
      TestHookPoint("launcher", "save", step + 1);
      CommitCheckpoint(run.path(), staging, step + 1, {"encoder.pt", "decoder.pt"}, config);
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
  std::vector<StageId> waiting{StageId::kEncoder, StageId::kDecoder};
  while (!waiting.empty()) {
    auto [id, m] = stages.Await(waiting, After(p.timeout_s), shutdown);
    ipc::ExpectType(m, ipc::MsgType::kBye, StageName(id));
    const ipc::ByeReport bye = ipc::DecodeBye(m);
    stages[id].peak_rss_bytes = bye.peak_rss_bytes;
    stages[id].device_peak_bytes = std::max(stages[id].device_peak_bytes, bye.device_peak_bytes);
    stages[id].peak_tensor_bytes = std::max(stages[id].peak_tensor_bytes, bye.peak_tensor_bytes);
    stages[id].peak_reserved_bytes = bye.peak_reserved_bytes;
    stages[id].finished = true;
    waiting.erase(std::find(waiting.begin(), waiting.end(), id));
  }
  for (StageLink& s : stages.all()) {
    if (s.remote()) continue;  // its node's launcher waits for it
    const ExitStatus status = s.child->Wait(After(p.timeout_s));
    if (!status.success())
      throw RuntimeError(std::string(s.name()) + " stage " + status.Describe() + " at shutdown");
    s.peak_rss_bytes = std::max(s.peak_rss_bytes, s.child->peak_rss_bytes());
  }
  abort_guard.armed = false;
  FinishRecording(debug, config);
  trace.Merge();

  // The digest comes from the final checkpoint the stages wrote.
  const fs::path final_dir =
      fs::path(run.path()) / "checkpoints" / ("step-" + std::to_string(completed));
  UNetEncoder enc(config.model, 0);
  UNetDecoder dec(config.model, 0);
  summary.param_digest = ParamDigest(LoadWeights((final_dir / "encoder.pt").string(), enc, t),
                                     LoadWeights((final_dir / "decoder.pt").string(), dec, t));
  summary.SetThroughput(start, completed, t.batch_size);

  std::vector<ProcessFigures> processes{{"launcher", PeakRssBytes(), std::nullopt, std::nullopt}};
  for (StageId id : {StageId::kEncoder, StageId::kDecoder}) {
    const auto& s = stages[id];
    processes.push_back({s.name(), s.peak_rss_bytes, s.device_peak_bytes, s.busy_s,
                         s.peak_tensor_bytes,
                         (id == StageId::kEncoder ? enc_device : dec_device).is_cuda()
                             ? std::optional<int64_t>(s.peak_reserved_bytes)
                             : std::nullopt,
                         s.residue_tensor_bytes,
                         PhasePeaks{s.compute_peak_tensor_bytes, s.step_peak_tensor_bytes}});
  }
  std::vector<DevicePeak> devices;
  for (const auto& [device, peak] : device_peak) {
    const bool shared_cpu =
        cpu_budget && device == stages[cpu_stage[0] ? StageId::kEncoder : StageId::kDecoder].device;
    devices.push_back({device, shared_cpu ? cpu_budget->get()->peak.load() : peak});
  }
  JsonWriter own;
  own.Field("schedule", p.schedule)
      .Field("transport", p.transport)
      .Field("nnodes", nodes.nnodes)
      .Field("run_id", run_id.Hex());
  WriteRunSummary(run, "pipeline", own, summary, processes, devices, t.memory_budget);
  return summary;
}

}  // namespace up
