// See stage_alone.h.
#include "stage/stage_alone.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cxxopts.hpp>
#include <filesystem>
#include <iostream>

#include "common/base/byte_size.h"
#include "common/base/command_line.h"
#include "common/base/errors.h"
#include "common/base/fs_util.h"
#include "common/base/logging.h"
#include "common/config/config_file.h"
#include "common/device/device_budget.h"
#include "common/device/device_memory.h"
#include "common/device/out_of_memory.h"
#include "common/device/tensor_accounting.h"
#include "common/layout/level_times.h"
#include "common/model/level_timing.h"
#include "common/model/precision.h"
#include "common/model/tensor_diff.h"
#include "common/model/tensor_file.h"
#include "common/model/unet.h"
#include "common/run/recording_format.h"
#include "common/training/stage_optimizer.h"
#include "ipc/schedule.h"

namespace up::stage {

// The stage shell is written in the control protocol's and the transports' terms.
using namespace ipc;  // NOLINT(build/namespaces)

namespace {

namespace fs = std::filesystem;

std::string Stem(const std::string& file) { return fs::path(file).stem().string(); }

// What the stage's neighbour sent it on one channel, from the recording, in
// (step, micro-batch) order.
class RecordedReceiver : public TensorReceiver {
 public:
  RecordedReceiver(std::string dir, const recording::Index& index, const std::string& direction,
                   int channel)
      : dir_(std::move(dir)), direction_(direction) {
    for (const auto& e : index.entries)
      if (e.kind == "boundary" && e.direction == direction && e.channel == channel)
        queue_.push_back(e);
    std::sort(queue_.begin(), queue_.end(), [](const auto& a, const auto& b) {
      return std::tie(a.step, a.micro_batch) < std::tie(b.step, b.micro_batch);
    });
  }
  TensorMessage Receive(Deadline) override {
    if (next_ >= queue_.size())
      throw UsageError("the recording holds no more " + direction_ + " messages to replay");
    const recording::Entry& e = queue_[next_++];
    TensorMessage m;
    m.meta = {static_cast<uint64_t>(e.step), static_cast<uint32_t>(e.micro_batch),
              direction_ == "forward" ? Direction::kForward : Direction::kBackward};
    for (auto& [name, t] : LoadTensorFile((fs::path(dir_) / e.file).string()))
      m.tensors.push_back({name, t});
    return m;
  }
  void Release(const TensorMessage&) override {}

 private:
  std::string dir_, direction_;
  std::vector<recording::Entry> queue_;
  size_t next_ = 0;
};

// Compares what the stage sends on one channel with what was recorded.
class ComparingSender : public TensorSender {
 public:
  ComparingSender(std::string dir, const recording::Index& index, DiffReport& report, int channel,
                  size_t channels)
      : dir_(std::move(dir)),
        index_(index),
        report_(report),
        channel_(channel),
        file_channel_(recording::FileChannel(channel, channels)) {}
  void Send(const MessageMeta& meta, const std::vector<NamedTensor>& tensors, Deadline) override {
    const std::string direction = meta.direction == Direction::kForward ? "forward" : "backward";
    const int64_t step = static_cast<int64_t>(meta.step);
    const int mb = static_cast<int>(meta.micro_batch);
    const recording::Entry* e = index_.FindBoundary(direction, channel_, step, mb);
    const std::string stem = Stem(recording::BoundaryFile(direction, step, mb, file_channel_));
    if (!e) return report_.Missing(stem, "not in the recording");
    const NamedTensors want = LoadTensorFile((fs::path(dir_) / e->file).string());
    for (const NamedTensor& t : tensors) {
      auto it =
          std::find_if(want.begin(), want.end(), [&](const auto& w) { return w.first == t.name; });
      if (it == want.end())
        report_.Missing(stem + ":" + t.name, "not in the recording");
      else
        report_.Compare(stem + ":" + t.name, t.tensor, it->second);
    }
  }

 private:
  std::string dir_;
  const recording::Index& index_;
  DiffReport& report_;
  int channel_, file_channel_;
};

// Random tensors shaped like the boundary, for --standalone.
class SyntheticReceiver : public TensorReceiver {
 public:
  SyntheticReceiver(BoundarySpec spec, int micro_batches, Direction direction,
                    torch::ScalarType dtype)
      : spec_(std::move(spec)),
        micro_batches_(micro_batches),
        direction_(direction),
        dtype_(dtype) {}
  TensorMessage Receive(Deadline) override {
    TensorMessage m;
    m.meta = {static_cast<uint64_t>(count_ / micro_batches_),
              static_cast<uint32_t>(count_ % micro_batches_), direction_};
    ++count_;
    for (size_t i = 0; i < spec_.names.size(); ++i)  // boundary shape, autocast's dtype
      m.tensors.push_back({spec_.names[i], torch::randn(spec_.shapes[i], dtype_)});
    return m;
  }
  void Release(const TensorMessage&) override {}

 private:
  BoundarySpec spec_;
  int micro_batches_;
  Direction direction_;
  torch::ScalarType dtype_;
  int64_t count_ = 0;
};

class DiscardingSender : public TensorSender {
 public:
  void Send(const MessageMeta&, const std::vector<NamedTensor>&, Deadline) override {}
};

// One step of this stage's turns in the sequential schedule (ipc/schedule.h),
// as the launcher would send them in a run; the norms go with the turn that
// steps.
std::vector<TurnRequest> StepTurns(const StageContext& ctx, int64_t step, int micro_batches,
                                   bool global_norms, const std::vector<float>& all_norms) {
  const std::vector<ChainPhase> phases =
      ChainSchedule(ScheduleKind::kSequential, ctx.layout.size(), micro_batches, global_norms);
  std::vector<TurnRequest> turns;
  for (std::vector<Action>& actions : StageTurns(phases, ctx.stage)) {
    const bool steps = std::any_of(actions.begin(), actions.end(),
                                   [](const Action& a) { return a.op == Op::kStep; });
    turns.push_back({step, std::move(actions), steps ? all_norms : std::vector<float>{}});
  }
  return turns;
}

// The context of part `part` (1-based) of the encoder or decoder of `config`,
// with no channels yet; UsageError naming --part when there is no such part.
StageContext PartContext(const Config& config, const std::string& stage, int part) {
  torch::set_num_threads(config.train.threads);
  StageContext ctx;
  ctx.config = config;
  ctx.layout = ResolveLayout(config);
  ctx.stage = StageIndexOf(ctx.layout, stage == "encoder", part - 1, "--part");
  return ctx;
}

int Replay(const std::string& dir, const std::string& stage, int part, const WorkerFactory& factory,
           const Tolerance& tol) {
  const Config config = LoadConfig((fs::path(dir) / recording::kConfigFile).string(), {});
  const recording::Index index = recording::ReadIndex(dir);
  if (index.steps.empty()) throw UsageError("recording '" + dir + "' holds no recorded step");
  StageContext ctx = PartContext(config, stage, part);
  const StageSpec& spec = ctx.layout.stages[static_cast<size_t>(ctx.stage)];
  const std::string key = spec.Key();
  const std::string last_key = ctx.layout.stages.back().Key();
  DiffReport report(std::cout, tol, /*verbose=*/true);
  // Every channel of the stage: what its neighbour sent comes from the
  // recording (forward into it, gradients back to it); what it sends is compared.
  std::vector<std::unique_ptr<RecordedReceiver>> receivers;
  std::vector<std::unique_ptr<ComparingSender>> senders;
  for (size_t c = 0; c < ctx.layout.channels.size(); ++c) {
    const StageChannel& ch = ctx.layout.channels[c];
    if (ch.from != ctx.stage && ch.to != ctx.stage) continue;
    const int channel = static_cast<int>(c);
    receivers.push_back(std::make_unique<RecordedReceiver>(
        dir, index, ch.to == ctx.stage ? "forward" : "backward", channel));
    senders.push_back(
        std::make_unique<ComparingSender>(dir, index, report, channel, ctx.layout.channels.size()));
    ctx.channels.push_back({channel, senders.back().get(), receivers.back().get()});
  }
  std::unique_ptr<StageWorker> worker = factory(ctx);
  const recording::Entry* start = index.Find("stage_file", key, index.steps.front());
  if (!start) throw UsageError("recording '" + dir + "' has no " + key + " stage file");
  worker->Load((fs::path(dir) / start->file).string());
  worker->on_loss = [&](int64_t step, int mb, double loss) {
    const std::string label = "loss-s" + std::to_string(step) + "-m" + std::to_string(mb);
    const recording::Entry* e = index.Find("loss", last_key, step, mb);
    if (!e) return report.Missing(label, "not in the recording");
    report.Compare(label, torch::tensor(loss, torch::kFloat64),
                   torch::tensor(e->value, torch::kFloat64));
  };
  std::cout << "replaying the " << spec.Name() << (spec.parts == 1 ? " stage" : "") << " ("
            << spec.LevelsText() << ") over steps";
  for (int64_t s : index.steps) std::cout << " " << s;
  std::cout << " of " << dir << " (0-based)" << std::endl;
  for (int64_t step : index.steps) {
    std::vector<float> all_norms;
    if (const recording::Entry* n = index.Find("step_norms", key, step)) {
      const torch::Tensor t = LoadTensorFile((fs::path(dir) / n->file).string()).at(0).second;
      all_norms.assign(t.data_ptr<float>(), t.data_ptr<float>() + t.numel());  // (P,)
    }
    for (const TurnRequest& turn :
         StepTurns(ctx, step, index.micro_batches, NeedsGlobalNorms(config.train), all_norms))
      worker->RunTurn(turn);
    const recording::Entry* after = index.Find("weights", key, step + 1);
    if (!after) {
      report.Missing(Stem(recording::WeightsFile(key, step + 1)), "not in the recording");
      continue;
    }
    const NamedTensors want = LoadTensorFile((fs::path(dir) / after->file).string());
    const NamedTensors got = NamedState(worker->module());
    for (const auto& [name, t] : want) {
      auto it =
          std::find_if(got.begin(), got.end(), [&](const auto& g) { return g.first == name; });
      const std::string label = Stem(after->file) + ":" + name;
      if (it == got.end())
        report.Missing(label, "the stage has no such tensor");
      else
        report.Compare(label, it->second, t);
    }
  }
  std::cout << key << " replay: " << report.Summary() << std::endl;
  return report.failures().empty() ? 0 : 1;
}

int Standalone(const std::string& config_path, const std::vector<std::string>& overrides,
               int64_t steps, int part, const std::string& stage, const WorkerFactory& factory) {
  Config config = LoadConfig(config_path, overrides);
  const std::string device_note = ResolveAutoDevicesHere(&config).why;
  if (!device_note.empty()) LogInfo(device_note);
  const TrainConfig& t = config.train;
  StageContext ctx = PartContext(config, stage, part);
  const StageSpec& spec = ctx.layout.stages[static_cast<size_t>(ctx.stage)];
  const std::string name = spec.Name();
  // train.memory_budget holds for the stage alone as for the stage in a run
  // (declared before any tensor of the stage, so it outlives them): whether
  // one stage fits a card can be tried without the other.
  const torch::Device device = ParseDevice(spec.device, spec.device_key);
  DeviceBudget budget;
  budget.budget = t.memory_budget;
  ApplyMemoryBudget(device, t.memory_budget);
  if (!device.is_cuda()) UseDeviceBudget(&budget);
  struct StopCharging {
    ~StopCharging() { UseDeviceBudget(nullptr); }
  } stop_charging;
  // Every neighbour's messages are random tensors of the layout's shapes, in
  // the dtype the boundary carries (autocast's output under bf16 or fp16).
  const torch::ScalarType dtype = ForwardDtype(t);
  std::vector<std::unique_ptr<SyntheticReceiver>> receivers;
  DiscardingSender sender;
  for (size_t c = 0; c < ctx.layout.channels.size(); ++c) {
    const StageChannel& ch = ctx.layout.channels[c];
    if (ch.from != ctx.stage && ch.to != ctx.stage) continue;
    BoundarySpec shapes;
    for (const WireTensor& w : ch.tensors) {
      shapes.names.push_back(w.name);
      shapes.shapes.push_back(w.shape);
    }
    receivers.push_back(std::make_unique<SyntheticReceiver>(
        shapes, t.micro_batches, ch.to == ctx.stage ? Direction::kForward : Direction::kBackward,
        dtype));
    ctx.channels.push_back({static_cast<int>(c), &sender, receivers.back().get()});
  }
  double total_s = 0;
  try {
    std::unique_ptr<StageWorker> worker = factory(ctx);
    // A step that needs every stage's gradient norms (clipping, fp16) gets
    // zeros for the other half's: the stage puts in its own.
    std::vector<float> norms;
    if (NeedsGlobalNorms(t)) norms.assign(static_cast<size_t>(worker->HalfParameters()), 0.f);
    for (int64_t step = 0; step < steps; ++step) {
      const auto start = std::chrono::steady_clock::now();
      for (const TurnRequest& turn :
           StepTurns(ctx, step, t.micro_batches, NeedsGlobalNorms(t), norms))
        worker->RunTurn(turn);
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (step > 0) total_s += s;  // the first step warms up
      std::printf("%s standalone step %lld: %.1f ms\n", name.c_str(),
                  static_cast<long long>(step + 1), 1e3 * s);
    }
  } catch (const c10::OutOfMemoryError& e) {
    throw RuntimeError(OutOfMemoryLine(name + (spec.parts == 1 ? " stage" : "") + " (standalone)",
                                       e, config, false));
  }
  if (steps > 1)
    std::printf("%s standalone: %.1f ms per step after the first (%d micro-batches of %d)\n",
                name.c_str(), 1e3 * total_s / (steps - 1), t.micro_batches,
                t.batch_size / t.micro_batches);
  std::printf(
      "%s standalone: peak tensor bytes %.1f MiB on %s%s\n", name.c_str(),
      (device.is_cuda() ? TensorBytesOn(device).peak : budget.peak.load()) / 1048576.0,
      device.str().c_str(),
      t.memory_budget > 0 ? Str(" (budget ", FormatBytes(t.memory_budget), ")").c_str() : "");
  return 0;
}

// --time-levels: every level of the stage's half timed on part `part`'s
// device (pipeline.balance: time), written to `out` as one JSON line.
int TimeLevels(const std::string& config_path, const std::vector<std::string>& overrides,
               const std::string& out, int part, const std::string& stage) {
  Config config = LoadConfig(config_path, overrides);
  ResolveAutoDevicesHere(&config);
  torch::set_num_threads(config.train.threads);
  const PipelineLayout layout = ResolveLayout(config);
  const StageSpec& spec = layout.stages[static_cast<size_t>(
      StageIndexOf(layout, stage == "encoder", part - 1, "--part"))];
  const torch::Device device = ParseDevice(spec.device, spec.device_key);
  std::vector<double> ms;
  try {
    ms = stage == "encoder" ? TimeEncoderLevels(config, device) : TimeDecoderLevels(config, device);
  } catch (const c10::OutOfMemoryError& e) {
    throw RuntimeError(
        OutOfMemoryLine(stage + "'s levels (pipeline.balance: time)", e, config, false));
  }
  WriteFileAtomic(out, LevelTimesJson(stage, ms, device.str()));
  std::string text;
  for (size_t i = 0; i < ms.size(); ++i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%s%.2f", i ? ", " : "", ms[i]);
    text += buf;
  }
  LogInfo(Str(stage, " levels on ", device.str(), ": ", text, " ms"));
  return 0;
}

}  // namespace

bool WantsStageAlone(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--replay") || !std::strncmp(argv[i], "--replay=", 9) ||
        !std::strcmp(argv[i], "--standalone") || !std::strcmp(argv[i], "--time-levels"))
      return true;
  }
  return false;
}

int StageAloneMain(int argc, char** argv, const std::string& stage, const WorkerFactory& factory) {
  try {
    cxxopts::Options options(stage + "_proc", "The " + stage + " stage of unet-pipeline, alone.");
    options.add_options()("replay", "recording folder to replay", cxxopts::value<std::string>())(
        "atol", "absolute tolerance", cxxopts::value<double>()->default_value("0"))(
        "rtol", "relative tolerance", cxxopts::value<double>()->default_value("0"))(
        "standalone", "feed random boundary tensors and time each step")(
        "time-levels", "time each level of the half into this file (pipeline.balance: time)",
        cxxopts::value<std::string>())("config", "config file (--standalone)",
                                       cxxopts::value<std::string>())(
        "set", "override a key (--standalone, --time-levels)",
        cxxopts::value<std::vector<std::string>>())("steps", "steps to time (--standalone)",
                                                    cxxopts::value<int64_t>()->default_value("5"))(
        "part", "which part of its half (1-based)", cxxopts::value<int>()->default_value("1"))(
        "v,verbose", "debug logging")("q,quiet", "warnings and errors only")("h,help", "this help");
    const auto parsed = ParseCommandLine(options, argc, argv, stage + "_proc --help");
    if (!parsed) return 0;
    const cxxopts::ParseResult& r = *parsed;
    InitLogging(stage, VerbosityOf(r));
    if (r.count("replay")) {
      const Tolerance tol{r["atol"].as<double>(), r["rtol"].as<double>()};
      if (tol.atol < 0 || tol.rtol < 0) throw UsageError("--atol and --rtol must be >= 0");
      return Replay(r["replay"].as<std::string>(), stage, r["part"].as<int>(), factory, tol);
    }
    if (!r.count("config")) {
      throw UsageError(std::string(r.count("time-levels") ? "--time-levels" : "--standalone") +
                       " needs --config FILE");
    }
    if (r.count("time-levels"))
      return TimeLevels(
          r["config"].as<std::string>(),
          r.count("set") ? r["set"].as<std::vector<std::string>>() : std::vector<std::string>{},
          r["time-levels"].as<std::string>(), r["part"].as<int>(), stage);
    const int64_t steps = r["steps"].as<int64_t>();
    if (steps < 1) throw UsageError("--steps " + std::to_string(steps) + ": must be >= 1");
    return Standalone(
        r["config"].as<std::string>(),
        r.count("set") ? r["set"].as<std::vector<std::string>>() : std::vector<std::string>{},
        steps, r["part"].as<int>(), stage, factory);
  } catch (const std::exception& e) {
    int code = 1;
    std::string what = e.what();
    if (const auto* err = dynamic_cast<const Error*>(&e)) code = err->exit_code();
    if (const auto* c10 = dynamic_cast<const c10::Error*>(&e)) what = c10->what_without_backtrace();
    std::cerr << "[" << stage << "] error: " << what.substr(0, what.find('\n')) << std::endl;
    return code;
  }
}

}  // namespace up::stage
