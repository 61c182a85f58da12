// See stage_worker.h.
#include "stage/stage_worker.h"

#include <signal.h>
#include <unistd.h>

#include <cxxopts.hpp>
#include <iostream>
#include <optional>

#include "common/base/command_line.h"
#include "common/base/deadline.h"
#include "common/base/errors.h"
#include "common/base/logging.h"
#include "common/base/proc_stats.h"
#include "common/base/sha256.h"
#include "common/base/test_hooks.h"
#include "common/base/trace.h"
#include "common/config/config_file.h"
#include "common/device/cuda_allocator_config.h"
#include "common/device/device_memory.h"
#include "common/device/out_of_memory.h"
#include "common/device/tensor_accounting.h"
#include "common/model/unet.h"
#include "ipc/c10d_channel.h"
#include "ipc/cuda_ipc_channel.h"
#include "ipc/device_budget_segment.h"
#include "stage/stage_alone.h"
#include "stage/stage_observer.h"

namespace up::stage {

// The stage shell is written in the control protocol's and the transports' terms.
using namespace ipc;  // NOLINT(build/namespaces)

namespace {

using Clock = std::chrono::steady_clock;
// A stage file received from node 0 for resume; far above any U-Net's.
constexpr uint64_t kMaxStageFileBytes = 64ULL << 30;

struct StageArgs {
  std::string config, control, run_id, rings, load, log, record, trace;
  int part = 1;                                 // of the half's parts, 1-based
  int replica = 0;                              // pipeline.replicas: which copy
  int replica_slot = -1;                        // its devices' (-1: replica)
  std::string c10d, store, node_addr, scratch;  // c10d transport; scratch: remote stages
  std::string device_budget;  // the CPU device's shared tensor total (device_budget_segment.h)
  int record_steps = 1;
  LogLevel level = LogLevel::kInfo;
};

StageArgs ParseArgs(int argc, char** argv, const std::string& stage) {
  cxxopts::Options options(stage + "_proc",
                           "The " + stage + " stage of unet-pipeline (started by the launcher).");
  options.add_options()("config", "resolved config file", cxxopts::value<std::string>())(
      "control", "launcher's control socket", cxxopts::value<std::string>())(
      "run-id", "run id (hex)", cxxopts::value<std::string>())(
      "replica", "which copy of the pipeline this process belongs to (pipeline.replicas)",
      cxxopts::value<int>()->default_value("0"))(
      "replica-slot", "the replica's place among its node's replicas, for its devices",
      cxxopts::value<int>()->default_value("-1"))(
      "part", "which part of its half this process runs (1-based)",
      cxxopts::value<int>()->default_value("1"))(
      "rings", "the run's ring names' prefix (one pair of rings per channel)",
      cxxopts::value<std::string>())("load", "stage file to resume from",
                                     cxxopts::value<std::string>()->default_value(""))(
      "log", "log file", cxxopts::value<std::string>()->default_value(""))(
      "record", "recording folder", cxxopts::value<std::string>()->default_value(""))(
      "record-steps", "steps to record", cxxopts::value<int>()->default_value("1"))(
      "trace", "trace part file", cxxopts::value<std::string>()->default_value(""))(
      "c10d", "boundary over a c10d process group: gloo | nccl",
      cxxopts::value<std::string>()->default_value(""))(
      "store", "c10d rendezvous store HOST:PORT", cxxopts::value<std::string>()->default_value(""))(
      "node-addr", "this node's address for c10d sockets",
      cxxopts::value<std::string>()->default_value("127.0.0.1"))(
      "scratch",
      "on a node without the run folder: a private folder; stage files cross the control "
      "connection",
      cxxopts::value<std::string>()->default_value(""))(
      "device-budget", "shared memory holding the CPU device's tensor total and budget",
      cxxopts::value<std::string>()->default_value(""))("v,verbose", "debug logging")(
      "q,quiet", "warnings and errors only")("h,help", "this help");
  const auto parsed = ParseCommandLine(options, argc, argv, stage + "_proc --help");
  if (!parsed) std::exit(0);
  const cxxopts::ParseResult& r = *parsed;
  StageArgs a;
  a.c10d = r["c10d"].as<std::string>();
  std::vector<const char*> required{"config", "control", "run-id"};
  for (const char* key :
       a.c10d.empty() ? std::vector<const char*>{"rings"} : std::vector<const char*>{"store"}) {
    required.push_back(key);
  }
  for (const char* key : required) {
    if (!r.count(key) || r[key].as<std::string>().empty())
      throw UsageError(stage + "_proc needs --" + key + " (it is started by unet-pipeline)");
  }
  a.config = r["config"].as<std::string>();
  a.control = r["control"].as<std::string>();
  a.run_id = r["run-id"].as<std::string>();
  if (a.c10d.empty()) a.rings = r["rings"].as<std::string>();
  a.part = r["part"].as<int>();
  a.replica = r["replica"].as<int>();
  a.replica_slot = r["replica-slot"].as<int>();
  a.store = r["store"].as<std::string>();
  a.node_addr = r["node-addr"].as<std::string>();
  a.scratch = r["scratch"].as<std::string>();
  a.device_budget = r["device-budget"].as<std::string>();
  a.load = r["load"].as<std::string>();
  a.log = r["log"].as<std::string>();
  a.record = r["record"].as<std::string>();
  a.record_steps = r["record-steps"].as<int>();
  a.trace = r["trace"].as<std::string>();
  a.level = VerbosityOf(r);
  return a;
}

// Answers the launcher until Finish. Throws on any failure.
void Serve(const std::string& stage, StageWorker& worker, ControlChannel& control, double wait_s,
           StageRecorder* recorder, const torch::Device& device, const std::string& scratch) {
  up::TensorBytes run_peak;  // the peaks over the whole run (turn peaks are reset)
  for (;;) {
    const int64_t wait_start = TracingOn() ? MonotonicMicros() : 0;
    ControlMessage m = control.Receive(After(wait_s));
    if (TracingOn()) TraceComplete(trace_event::kWaitTurn, "wait", wait_start, MonotonicMicros());
    switch (static_cast<MsgType>(m.type)) {
      case MsgType::kTurn: {
        const TurnRequest turn = DecodeTurn(m);
        TestHookPoint(stage, "turn", turn.step + 1);
        if (recorder) recorder->BeforeTurn(worker, turn);
        ResetPeakTensorBytes(device);  // the report carries this turn's own peak
        TurnReport report = worker.RunTurn(turn);
        up::TensorBytes tensors = TensorBytesOn(device);
        report.tensor_bytes = tensors.live;
        // The turn reset the peak around its optimizer step: the turn's is the largest part's.
        report.turn_peak_tensor_bytes = std::max(
            {tensors.peak, report.compute_peak_tensor_bytes, report.step_peak_tensor_bytes});
        tensors.peak = report.turn_peak_tensor_bytes;
        run_peak.Merge(tensors);
        if (recorder) recorder->AfterTurn(worker, turn);
        report.rss_bytes = CurrentRssBytes();
        report.device_peak_bytes = PeakDeviceBytes(device);
        LogDebug(Str("turn of step ", turn.step + 1, ": busy ", report.busy_s, " s, loss ",
                     report.loss, ", rss ", report.rss_bytes >> 20, " MiB"));
        control.Send(Encode(report));
        worker.Idle();
        break;
      }
      case MsgType::kSave: {
        SaveRequest save = DecodeSave(m);
        TraceSpan span(trace_event::kCheckpoint, "io");
        if (scratch.empty()) {
          worker.Save(save);
        } else {  // the run folder is on node 0: the file crosses the connection
          save.path = scratch + "/stage.pt";
          worker.Save(save);
          SendFile(control, save.path);
          std::remove(save.path.c_str());
        }
        LogInfo(Str("saved step ", save.step,
                    scratch.empty() ? " to " + save.path : " (sent to node 0)"));
        TestHookPoint(stage, "save", save.step);
        control.Send(EncodeSaved(save.step));
        break;
      }
      case MsgType::kPrefetch:
        worker.Prefetch();
        break;
      case MsgType::kFinish:
        LogInfo(Str("finished: peak rss ", PeakRssBytes() >> 20, " MiB, device peak ",
                    PeakDeviceBytes(device) >> 20, " MiB"));
        TestHookPoint(stage, "finish");
        run_peak.Merge(TensorBytesOn(device));
        control.Send(Encode(
            ByeReport{PeakRssBytes(), PeakDeviceBytes(device), run_peak.peak, run_peak.reserved}));
        return;
      default:
        throw RuntimeError(std::string("protocol error: the launcher sent ") + MsgTypeName(m.type));
    }
  }
}

// The c10d transport is joined after the handshake, so that a stage the
// launcher rejects, or whose peer never comes, is reported as such; the
// worker is built before, on these forwarders.
struct LateTransport {
  std::unique_ptr<TensorSender> sender;
  std::unique_ptr<TensorReceiver> receiver;
};
struct LateSender : TensorSender {
  explicit LateSender(LateTransport& t) : transport(t) {}
  void Send(const MessageMeta& meta, const std::vector<NamedTensor>& tensors,
            Deadline deadline) override {
    transport.sender->Send(meta, tensors, deadline);
  }
  LateTransport& transport;
};
struct LateReceiver : TensorReceiver {
  explicit LateReceiver(LateTransport& t) : transport(t) {}
  TensorMessage Receive(Deadline deadline) override {
    return transport.receiver->Receive(deadline);
  }
  void Release(const TensorMessage& m) override { transport.receiver->Release(m); }
  LateTransport& transport;
};

// The c10d transport: one rank per stage (its index in the layout), one
// pair of tags per channel (forward, backward). Gloo moves host tensors,
// NCCL device tensors.
void JoinC10d(const StageArgs& args, const Config& config, const PipelineLayout& layout, int stage,
              const torch::Device& device, const std::string& run_id,
              std::vector<std::unique_ptr<LateTransport>>& late) {
  C10dOptions o;
  o.backend = args.c10d;
  const size_t colon = args.store.rfind(':');
  if (colon == std::string::npos || colon == 0)
    throw UsageError("--store '" + args.store + "' must be HOST:PORT");
  o.store_host = args.store.substr(0, colon);
  o.store_port = std::atoi(args.store.c_str() + colon + 1);
  if (o.store_port < 1 || o.store_port > 65535)
    throw UsageError("--store '" + args.store + "' has no valid port (1 to 65535)");
  // Each replica's stages form a group of their own.
  o.prefix = config.pipeline.replicas > 1 ? run_id + "/r" + std::to_string(args.replica) : run_id;
  o.rank = stage;
  o.world_size = layout.size();
  o.bind_host = args.node_addr;
  o.timeout_s = config.pipeline.timeout_s;
  auto group = JoinStageGroup(o, device);
  const torch::Device wire_device = args.c10d == "nccl" ? device : torch::Device(torch::kCPU);
  size_t k = 0;
  for (size_t c = 0; c < layout.channels.size(); ++c) {
    const StageChannel& ch = layout.channels[c];
    if (ch.from != stage && ch.to != stage) continue;
    uint64_t max_bytes = 0;  // fp32: the most a message of the channel carries
    for (const WireTensor& t : ch.tensors) {
      uint64_t numel = 1;
      for (int64_t d : t.shape) numel *= static_cast<uint64_t>(d);
      max_bytes += numel * sizeof(float);
    }
    const bool downstream = ch.from == stage;
    const int peer = downstream ? ch.to : ch.from;
    const int forward_tag = 2 * static_cast<int>(c) + 1, backward_tag = forward_tag + 1;
    LateTransport& t = *late.at(k++);
    t.sender =
        std::make_unique<C10dTensorSender>(group, peer, downstream ? forward_tag : backward_tag,
                                           wire_device, config.train.micro_batches, o.timeout_s);
    t.receiver = std::make_unique<C10dTensorReceiver>(
        group, peer, downstream ? backward_tag : forward_tag, wire_device, max_bytes);
  }
  LogInfo(Str("joined the ", args.c10d, " group as rank ", o.rank, " of ", o.world_size, " (",
              args.node_addr, "), rendezvous ", args.store));
}

// The stage's place in the run: the config, its replica, the layout and
// which stage of it this process is.
StageContext StageContextOf(const StageArgs& args, const std::string& stage) {
  StageContext ctx;
  ctx.config = LoadConfig(args.config, {});
  const int replicas = ctx.config.pipeline.replicas;
  if (args.replica < 0 || args.replica >= replicas) {
    throw UsageError(Str("--replica ", args.replica, ": this run has pipeline.replicas = ",
                         replicas, " (0 to ", replicas - 1, ")"));
  }
  if (replicas > 1 && args.store.empty())
    throw UsageError(stage +
                     "_proc needs --store with pipeline.replicas > 1 (unet-pipeline gives it)");
  ctx.replica = args.replica;
  ctx.layout = ResolveLayout(ctx.config, args.replica_slot >= 0 ? args.replica_slot : args.replica);
  ctx.stage = StageIndexOf(ctx.layout, stage == "encoder", args.part - 1, "--part");
  return ctx;
}

// The stage's device, with the memory limits the run sets on it.
torch::Device OpenDevice(const StageArgs& args, const StageContext& ctx, const std::string& name) {
  const StageSpec& spec = ctx.layout.stages[static_cast<size_t>(ctx.stage)];
  const torch::Device device = ParseDevice(spec.device, spec.device_key);
  ApplyMemoryCapFromEnv(device);
  ApplyMemoryBudget(device, ctx.config.train.memory_budget);
  if (!args.device_budget.empty() && !device.is_cuda()) {
    // Mapped until the process exits: every tensor charged to it is freed
    // before then, and some only at exit.
    static auto* budget = new DeviceBudgetSegment(DeviceBudgetSegment::Open(args.device_budget));
    UseDeviceBudget(budget->get());
  }
  if (ctx.config.pipeline.transport == TransportKind::kCudaIpc && !device.is_cuda()) {
    throw UsageError("pipeline.transport = cuda_ipc: the " + name + " runs on " + spec.device +
                     "; CUDA IPC needs every stage on a CUDA device (or use shm)");
  }
  return device;
}

// One pair of endpoints per channel that touches this stage, observed for
// recording, and what they run on. Members are destroyed in reverse order:
// the observers before the transports they wrap, the rings last.
struct StageEndpoints {
  std::vector<std::unique_ptr<ShmRing>> rings;
  std::vector<std::unique_ptr<TensorSender>> senders;
  std::vector<std::unique_ptr<TensorReceiver>> receivers;
  std::vector<std::unique_ptr<LateTransport>> late;  // c10d: joined after the handshake
  std::vector<int> channel_index;
  std::unique_ptr<StageRecorder> recorder;
  std::vector<std::unique_ptr<ObservedSender>> observed_senders;
  std::vector<std::unique_ptr<ObservedReceiver>> observed_receivers;
};

// Opens the endpoints (the rings the launcher made, or c10d forwarders) and
// hands the observed ones to `ctx.channels`.
void OpenEndpoints(const StageArgs& args, const torch::Device& device, const RunId& run_id,
                   const std::string& key, StageContext* ctx, StageEndpoints* e) {
  for (size_t c = 0; c < ctx->layout.channels.size(); ++c) {
    const StageChannel& ch = ctx->layout.channels[c];
    if (ch.from != ctx->stage && ch.to != ctx->stage) continue;
    e->channel_index.push_back(static_cast<int>(c));
    if (!args.c10d.empty()) {
      e->late.push_back(std::make_unique<LateTransport>());
      e->receivers.push_back(std::make_unique<LateReceiver>(*e->late.back()));
      e->senders.push_back(std::make_unique<LateSender>(*e->late.back()));
      continue;
    }
    // Into this stage: forward in, gradients out; out of it: the reverse.
    const bool downstream = ch.from == ctx->stage;
    ShmRing* send_ring =
        e->rings.emplace_back(ShmRing::Open(ChannelRingName(args.rings, ch, downstream), run_id))
            .get();
    ShmRing* recv_ring =
        e->rings.emplace_back(ShmRing::Open(ChannelRingName(args.rings, ch, !downstream), run_id))
            .get();
    if (ctx->config.pipeline.transport == TransportKind::kCudaIpc) {
      e->senders.push_back(MakeCudaIpcSender(*send_ring, device.index()));
      e->receivers.push_back(MakeCudaIpcReceiver(*recv_ring, device.index()));
    } else {
      e->senders.push_back(std::make_unique<ShmTensorSender>(*send_ring));
      e->receivers.push_back(std::make_unique<ShmTensorReceiver>(*recv_ring));
      if (device.is_cuda()) {
        // Pinned once per process, so device copies from and into the rings run at full speed.
        RegisterHostMemory(send_ring->base(), send_ring->mapped_bytes());
        RegisterHostMemory(recv_ring->base(), recv_ring->mapped_bytes());
      }
    }
  }
  if (!args.record.empty()) {
    e->recorder = std::make_unique<StageRecorder>(args.record, key, args.record_steps,
                                                  ctx->layout.channels.size());
  }
  for (size_t i = 0; i < e->channel_index.size(); ++i) {
    e->observed_senders.push_back(
        std::make_unique<ObservedSender>(*e->senders[i], e->recorder.get(), e->channel_index[i]));
    e->observed_receivers.push_back(std::make_unique<ObservedReceiver>(*e->receivers[i]));
    ctx->channels.push_back({e->channel_index[i], e->observed_senders.back().get(),
                             e->observed_receivers.back().get()});
  }
}

// The handshake: Hello with what the launcher checks, then Welcome (with a
// stage file to resume from, on a node without the run folder) or Reject.
// False when rejected.
bool Handshake(const StageArgs& args, const StageContext& ctx, const std::string& key,
               double timeout_s, StageWorker& worker, ControlChannel& control) {
  Hello hello;
  hello.stage = key;
  hello.parameter_positions = worker.ParameterPositions();
  hello.pid = getpid();
  hello.config_sha256 = Sha256Hex(DumpConfig(ctx.config));
  hello.boundary_signature = worker.BoundarySignature();
  control.Send(Encode(hello));
  ControlMessage answer = control.Receive(After(timeout_s));
  if (answer.type == static_cast<uint32_t>(MsgType::kReject)) {
    // The launcher reports the reason as its error line; it needs no echo.
    LogDebug("rejected by the launcher: " + DecodeReject(answer));
    return false;
  }
  ExpectType(answer, MsgType::kWelcome, "launcher");
  if (DecodeWelcome(answer)) {  // resume on a node without the run folder
    if (args.scratch.empty())
      throw RuntimeError("the launcher sent a stage file without --scratch");
    const std::string path = args.scratch + "/resume.pt";
    ReceiveFile(control, path, kMaxStageFileBytes, After(timeout_s));
    worker.Load(path);
    std::remove(path.c_str());
  }
  return true;
}

// The stage's failure as the launcher's one error line (it reports what it
// is told); printed here only when nobody else will. Returns the exit code.
int ReportFailure(const std::exception& e, const std::string& stage, const std::string& key,
                  const std::string& name, const std::optional<Config>& config,
                  std::optional<ControlChannel>& control) {
  int code = 1;
  std::string what = e.what();
  if (const auto* err = dynamic_cast<const Error*>(&e)) code = err->exit_code();
  if (const auto* c10 = dynamic_cast<const c10::Error*>(&e)) what = c10->what_without_backtrace();
  if (const auto* oom = dynamic_cast<const c10::OutOfMemoryError*>(&e); oom && config)
    what = OutOfMemoryLine(name == stage ? stage + " stage" : name, *oom, *config, false);
  what = what.substr(0, what.find('\n'));
  bool told = false;
  if (control) {
    try {
      control->Send(Encode(Failure{code, what}));
      told = true;
    } catch (const std::exception&) {
      // The launcher is gone.
    }
  }
  if (!told) std::cerr << "[" << key << "] error: " << what << std::endl;
  return code;
}

}  // namespace

int StageMain(int argc, char** argv, const std::string& stage, const WorkerFactory& factory) {
  // Ctrl-C reaches the whole process group: the launcher decides how the run
  // stops (finish the step, checkpoint), so the stages ignore it.
  signal(SIGINT, SIG_IGN);
  UseCudaAllocatorDefaults();  // a stage started alone too
  InstallTensorAccounting();   // before the first tensor
  if (WantsStageAlone(argc, argv)) return StageAloneMain(argc, argv, stage, factory);
  std::optional<ControlChannel> control;
  std::optional<Config> config;  // for the out-of-memory line
  std::string key = stage;       // "encoder", "decoder2": logs, hooks, the handshake
  std::string name = stage;      // "decoder part 2 of 3": messages
  try {
    const StageArgs args = ParseArgs(argc, argv, stage);
    StageContext ctx = StageContextOf(args, stage);
    config = ctx.config;
    const int replicas = ctx.config.pipeline.replicas;
    const StageSpec& spec = ctx.layout.stages[static_cast<size_t>(ctx.stage)];
    key = ReplicaKey(spec.Key(), args.replica);
    name = spec.Name() + (replicas > 1 ? Str(" of replica ", args.replica) : "");
    // With a log file, the terminal gets only warnings (-v: everything).
    InitLogging(
        key, args.level, args.log,
        args.log.empty() || args.level == LogLevel::kDebug ? LogLevel::kDebug : LogLevel::kWarn);
    TestHookPoint(key, "start");
    if (!args.trace.empty()) StartTracing(args.trace, key + "_proc");
    const double timeout_s = ctx.config.pipeline.timeout_s;
    control.emplace(ControlChannel::ConnectTo(args.control, After(timeout_s)));
    control->set_peer_name("launcher");

    const RunId run_id = RunId::FromHex(args.run_id);
    const torch::Device device = OpenDevice(args, ctx, name);
    StageEndpoints endpoints;
    OpenEndpoints(args, device, run_id, key, &ctx, &endpoints);
    torch::set_num_threads(ctx.config.train.threads);

    std::unique_ptr<StageWorker> worker = factory(ctx);
    LogInfo(Str(name, " up (", spec.LevelsText(), "): pid ", getpid(), ", device ", device.str(),
                ", transport ", ctx.config.pipeline.transport, ", run id ", args.run_id));
    if (!Handshake(args, ctx, key, timeout_s, *worker, *control)) return 2;
    if (!args.load.empty()) worker->Load(args.load);
    if (!endpoints.late.empty())
      JoinC10d(args, ctx.config, ctx.layout, ctx.stage, device, run_id.Hex(), endpoints.late);
    if (replicas > 1) {
      worker->JoinReplicas({args.store, run_id.Hex(), spec.Key(),
                            args.node_addr.empty() ? "127.0.0.1" : args.node_addr, args.replica,
                            replicas, timeout_s});
    }
    ApplyTestHooks(key, *worker);
    TestHookPoint(key, "hello");
    StageRecorder* recorder = endpoints.recorder.get();
    if (recorder) {
      worker->on_loss = [recorder](int64_t step, int mb, double loss) {
        recorder->Loss(step, mb, loss);
      };
    }
    LogDebug("handshake done; serving the launcher");

    // Between turns a stage waits while the other stage computes a whole
    // turn, so its limit is longer than one turn's.
    Serve(key, *worker, *control, 2 * timeout_s + 60, recorder, device, args.scratch);
    StopTracing();
    return 0;
  } catch (const PeerGoneError& e) {
    // The launcher or the other stage is gone: the launcher reports it.
    std::cerr << "[" << key << "] stopping: " << e.what() << std::endl;
    return 1;
  } catch (const std::exception& e) {
    return ReportFailure(e, stage, key, name, config, control);
  }
}

}  // namespace up::stage
