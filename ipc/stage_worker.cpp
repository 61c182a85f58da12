// See stage_worker.h.
#include "ipc/stage_worker.h"

#include <signal.h>
#include <unistd.h>

#include <cxxopts.hpp>
#include <iostream>
#include <optional>

#include "common/deadline.h"
#include "common/device_memory.h"
#include "common/errors.h"
#include "common/logging.h"
#include "common/proc_stats.h"
#include "common/sha256.h"
#include "common/trace.h"
#include "ipc/cuda_ipc_channel.h"
#include "ipc/stage_alone.h"
#include "ipc/stage_observer.h"

namespace up::ipc {
namespace {

using Clock = std::chrono::steady_clock;

struct StageArgs {
  std::string config, control, run_id, send_ring, recv_ring, load, log, record, trace;
  int record_steps = 1;
  LogLevel level = LogLevel::kInfo;
};

StageArgs ParseArgs(int argc, char** argv, const std::string& stage) {
  cxxopts::Options options(stage + "_proc",
                           "The " + stage + " stage of unet-pipeline (started by the launcher).");
  options.add_options()("config", "resolved config file", cxxopts::value<std::string>())(
      "control", "launcher's control socket", cxxopts::value<std::string>())(
      "run-id", "run id (hex)", cxxopts::value<std::string>())(
      "send-ring", "ring to the other stage", cxxopts::value<std::string>())(
      "recv-ring", "ring from the other stage", cxxopts::value<std::string>())(
      "load", "stage file to resume from", cxxopts::value<std::string>()->default_value(""))(
      "log", "log file", cxxopts::value<std::string>()->default_value(""))(
      "record", "recording folder", cxxopts::value<std::string>()->default_value(""))(
      "record-steps", "steps to record", cxxopts::value<int>()->default_value("1"))(
      "trace", "trace part file", cxxopts::value<std::string>()->default_value(""))(
      "v,verbose", "debug logging")("q,quiet", "warnings and errors only")("h,help", "this help");
  cxxopts::ParseResult r;
  try {
    r = options.parse(argc, argv);
  } catch (const cxxopts::exceptions::exception& e) {
    throw UsageError(std::string(e.what()) + "; see " + stage + "_proc --help");
  }
  if (r.count("help")) {
    std::cout << options.help() << std::endl;
    std::exit(0);
  }
  StageArgs a;
  for (const char* key : {"config", "control", "run-id", "send-ring", "recv-ring"}) {
    if (!r.count(key))
      throw UsageError(stage + "_proc needs --" + key + " (it is started by unet-pipeline)");
  }
  a.config = r["config"].as<std::string>();
  a.control = r["control"].as<std::string>();
  a.run_id = r["run-id"].as<std::string>();
  a.send_ring = r["send-ring"].as<std::string>();
  a.recv_ring = r["recv-ring"].as<std::string>();
  a.load = r["load"].as<std::string>();
  a.log = r["log"].as<std::string>();
  a.record = r["record"].as<std::string>();
  a.record_steps = r["record-steps"].as<int>();
  a.trace = r["trace"].as<std::string>();
  a.level = r.count("quiet")     ? LogLevel::kWarn
            : r.count("verbose") ? LogLevel::kDebug
                                 : LogLevel::kInfo;
  return a;
}

// Answers the launcher until Finish. Throws on any failure.
void Serve(StageWorker& worker, ControlChannel& control, double wait_s, StageRecorder* recorder,
           const torch::Device& device) {
  for (;;) {
    const int64_t wait_start = TracingOn() ? MonotonicMicros() : 0;
    ControlMessage m = control.Receive(After(wait_s));
    if (TracingOn()) TraceComplete(trace_event::kWaitTurn, "wait", wait_start, MonotonicMicros());
    switch (static_cast<MsgType>(m.type)) {
      case MsgType::kTurn: {
        const TurnRequest turn = DecodeTurn(m);
        if (recorder) recorder->BeforeTurn(worker, turn);
        TurnReport report = worker.RunTurn(turn);
        if (recorder) recorder->AfterTurn(worker, turn);
        report.rss_bytes = CurrentRssBytes();
        report.device_peak_bytes = PeakDeviceBytes(device);
        LogDebug(Str("turn of step ", turn.step + 1, ": busy ", report.busy_s, " s, loss ",
                     report.loss, ", rss ", report.rss_bytes >> 20, " MiB"));
        control.Send(Encode(report));
        break;
      }
      case MsgType::kSave: {
        const SaveRequest save = DecodeSave(m);
        TraceSpan span(trace_event::kCheckpoint, "io");
        worker.Save(save);
        LogInfo(Str("saved step ", save.step, " to ", save.path));
        control.Send(EncodeSaved(save.step));
        break;
      }
      case MsgType::kFinish:
        LogInfo(Str("finished: peak rss ", PeakRssBytes() >> 20, " MiB, device peak ",
                    PeakDeviceBytes(device) >> 20, " MiB"));
        control.Send(Encode(ByeReport{PeakRssBytes(), PeakDeviceBytes(device)}));
        return;
      default:
        throw RuntimeError(std::string("protocol error: the launcher sent ") + MsgTypeName(m.type));
    }
  }
}

}  // namespace

int StageMain(int argc, char** argv, const std::string& stage, const WorkerFactory& factory) {
  // Ctrl-C reaches the whole process group: the launcher decides how the run
  // stops (finish the step, checkpoint), so the stages ignore it.
  signal(SIGINT, SIG_IGN);
  if (WantsStageAlone(argc, argv)) return StageAloneMain(argc, argv, stage, factory);
  std::optional<ControlChannel> control;
  try {
    const StageArgs args = ParseArgs(argc, argv, stage);
    // With a log file, the terminal gets only warnings (-v: everything).
    InitLogging(
        stage, args.level, args.log,
        args.log.empty() || args.level == LogLevel::kDebug ? LogLevel::kDebug : LogLevel::kWarn);
    if (!args.trace.empty()) StartTracing(args.trace, stage + "_proc");
    StageContext ctx;
    ctx.config = LoadConfig(args.config, {});
    const double timeout_s = ctx.config.pipeline.timeout_s;
    control.emplace(ControlChannel::Connect(args.control, After(timeout_s)));
    control->set_peer_name("launcher");

    const RunId run_id = RunId::FromHex(args.run_id);
    std::unique_ptr<ShmRing> send_ring = ShmRing::Open(args.send_ring, run_id);
    std::unique_ptr<ShmRing> recv_ring = ShmRing::Open(args.recv_ring, run_id);
    const StagePlacement& placement =
        stage == "encoder" ? ctx.config.pipeline.encoder : ctx.config.pipeline.decoder;
    const torch::Device device =
        ParseDevice(placement.device, "pipeline.stages." + stage + ".device");
    ApplyMemoryCapFromEnv(device);
    std::unique_ptr<TensorSender> transport_sender;
    std::unique_ptr<TensorReceiver> transport_receiver;
    if (ctx.config.pipeline.transport == "cuda_ipc") {
      if (!device.is_cuda()) {
        throw UsageError("pipeline.transport = cuda_ipc: the " + stage + " runs on " +
                         placement.device +
                         "; CUDA IPC needs both stages on CUDA devices (or use shm)");
      }
      transport_sender = MakeCudaIpcSender(*send_ring, device.index());
      transport_receiver = MakeCudaIpcReceiver(*recv_ring, device.index());
    } else {
      transport_sender = std::make_unique<ShmTensorSender>(*send_ring);
      transport_receiver = std::make_unique<ShmTensorReceiver>(*recv_ring);
      if (device.is_cuda()) {
        // Pinned once per process, so device copies from and into the rings run at full speed.
        RegisterHostMemory(send_ring->base(), send_ring->mapped_bytes());
        RegisterHostMemory(recv_ring->base(), recv_ring->mapped_bytes());
      }
    }
    std::unique_ptr<StageRecorder> recorder;
    if (!args.record.empty()) {
      recorder = std::make_unique<StageRecorder>(args.record, stage, args.record_steps);
    }
    ObservedSender sender(*transport_sender, recorder.get());
    ObservedReceiver receiver(*transport_receiver);
    ctx.sender = &sender;
    ctx.receiver = &receiver;
    torch::set_num_threads(ctx.config.train.threads);

    std::unique_ptr<StageWorker> worker = factory(ctx);
    LogInfo(Str(stage, " stage up: pid ", getpid(), ", device ", device.str(), ", transport ",
                ctx.config.pipeline.transport, ", run id ", args.run_id));
    Hello hello;
    hello.stage = stage;
    hello.pid = getpid();
    hello.config_sha256 = Sha256Hex(DumpConfig(ctx.config));
    hello.boundary_signature = worker->BoundarySignature();
    control->Send(Encode(hello));
    ControlMessage answer = control->Receive(After(timeout_s));
    if (answer.type == static_cast<uint32_t>(MsgType::kReject))
      throw UsageError(DecodeReject(answer));
    ExpectType(answer, MsgType::kWelcome, "launcher");
    if (!args.load.empty()) worker->Load(args.load);
    ApplyTestHooks(stage, *worker);
    if (recorder) {
      worker->on_loss = [&recorder](int64_t step, int mb, double loss) {
        recorder->Loss(step, mb, loss);
      };
    }
    LogDebug("handshake done; serving the launcher");

    // Between turns a stage waits while the other stage computes a whole
    // turn, so its limit is longer than one turn's.
    Serve(*worker, *control, 2 * timeout_s + 60, recorder.get(), device);
    StopTracing();
    return 0;
  } catch (const PeerGoneError& e) {
    // The launcher or the other stage is gone: the launcher reports it.
    std::cerr << "[" << stage << "] stopping: " << e.what() << std::endl;
    return 1;
  } catch (const std::exception& e) {
    int code = 1;
    std::string what = e.what();
    if (const auto* err = dynamic_cast<const Error*>(&e)) code = err->exit_code();
    if (const auto* c10 = dynamic_cast<const c10::Error*>(&e)) what = c10->what_without_backtrace();
    what = what.substr(0, what.find('\n'));
    std::cerr << "[" << stage << "] error: " << what << std::endl;
    if (control) {
      try {
        control->Send(Encode(Failure{code, what}));
      } catch (const std::exception&) {
        // The launcher is gone; nothing more to tell.
      }
    }
    return code;
  }
}

}  // namespace up::ipc
