// See stage_observer.h.
#include "stage/stage_observer.h"

#include <algorithm>

#include "common/device/tensor_accounting.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/base/errors.h"
#include "common/base/json_writer.h"
#include "common/base/logging.h"
#include "common/base/trace.h"
#include "common/model/tensor_file.h"
#include "common/model/unet.h"
#include "common/run/recording_format.h"

namespace up::stage {

// The stage shell is written in the control protocol's and the transports' terms.
using namespace ipc;  // NOLINT(build/namespaces)

namespace {

namespace fs = std::filesystem;

bool HasStep(const TurnRequest& turn) {
  for (const Action& a : turn.actions)
    if (a.op == Op::kStep) return true;
  return false;
}

// A validation turn's messages and model are no part of a step's record.
bool Validates(const TurnRequest& turn) {
  for (const Action& a : turn.actions)
    if (a.op == Op::kValForward || a.op == Op::kValPredict) return true;
  return false;
}

std::string DirectionName(Direction d) { return d == Direction::kForward ? "forward" : "backward"; }

}  // namespace

StageRecorder::StageRecorder(std::string dir, std::string stage, int steps, size_t channels)
    : dir_(std::move(dir)), stage_(std::move(stage)), steps_(steps), channels_(channels) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) throw RuntimeError("cannot create the recording folder '" + dir_ + "': " + ec.message());
  fs::remove(fs::path(dir_) / recording::PartIndexFile(stage_), ec);
}

bool StageRecorder::Recording(int64_t step) const {
  return first_ >= 0 && step >= first_ && step < first_ + steps_;
}

void StageRecorder::BeforeTurn(StageWorker& worker, const TurnRequest& turn) {
  paused_ = Validates(turn);
  if (paused_) return;
  if (first_ < 0) first_ = turn.step;
  if (!Recording(turn.step)) return;
  if (!snapshots_.count(turn.step)) Snapshot(worker, turn.step);
  if (HasStep(turn)) {
    const std::string file = recording::StepNormsFile(stage_, turn.step);
    const NamedTensors norms{
        {"step_norms", torch::tensor(turn.all_norms, torch::kFloat32)}};  // (P,) or (0,)
    SaveTensorFile((fs::path(dir_) / file).string(), norms);
    JsonWriter e;
    e.Field("kind", "step_norms")
        .Field("stage", stage_)
        .Field("file", file)
        .Field("step", turn.step)
        .Raw("tensors", DescribeTensorsJson(norms));
    Append(e.str());
  }
}

void StageRecorder::AfterTurn(StageWorker& worker, const TurnRequest& turn) {
  if (paused_) {
    paused_ = false;
    return;
  }
  if (Recording(turn.step) && HasStep(turn)) Snapshot(worker, turn.step + 1);
}

void StageRecorder::Snapshot(StageWorker& worker, int64_t step) {
  snapshots_.insert(step);
  const std::string stage_file = recording::StageFile(stage_, step);
  worker.Save(SaveRequest{step, (fs::path(dir_) / stage_file).string()});
  const std::string weights_file = recording::WeightsFile(stage_, step);
  const NamedTensors weights = NamedState(worker.module());
  SaveTensorFile((fs::path(dir_) / weights_file).string(), weights);
  JsonWriter s, w;
  s.Field("kind", "stage_file")
      .Field("stage", stage_)
      .Field("file", stage_file)
      .Field("step", step);
  w.Field("kind", "weights")
      .Field("stage", stage_)
      .Field("file", weights_file)
      .Field("step", step)
      .Raw("tensors", DescribeTensorsJson(weights));
  Append(s.str());
  Append(w.str());
}

void StageRecorder::Sent(int channel, const MessageMeta& meta,
                         const std::vector<NamedTensor>& tensors) {
  const int64_t step = static_cast<int64_t>(meta.step);
  if (paused_ || !Recording(step)) return;
  const std::string direction = DirectionName(meta.direction);
  const int mb = static_cast<int>(meta.micro_batch);
  const std::string file =
      recording::BoundaryFile(direction, step, mb, recording::FileChannel(channel, channels_));
  NamedTensors named;
  for (const NamedTensor& t : tensors) named.emplace_back(t.name, t.tensor);
  SaveTensorFile((fs::path(dir_) / file).string(), named);
  JsonWriter e;
  e.Field("kind", "boundary")
      .Field("stage", stage_)
      .Field("direction", direction)
      .Field("channel", channel)
      .Field("file", file)
      .Field("step", step)
      .Field("micro_batch", mb)
      .Raw("tensors", DescribeTensorsJson(named));
  Append(e.str());
}

void StageRecorder::Loss(int64_t step, int micro_batch, double loss) {
  if (paused_ || !Recording(step)) return;
  JsonWriter e;
  e.Field("kind", "loss")
      .Field("stage", stage_)
      .Field("step", step)
      .Field("micro_batch", micro_batch)
      .Field("value", loss);
  Append(e.str());
}

void StageRecorder::Append(const std::string& json_line) {
  const std::string path = (fs::path(dir_) / recording::PartIndexFile(stage_)).string();
  std::ofstream out(path, std::ios::app);
  out << json_line << "\n";
  if (!out) throw RuntimeError("cannot append to the recording index '" + path + "'");
}

void ObservedSender::Send(const MessageMeta& meta, const std::vector<NamedTensor>& tensors,
                          Deadline deadline) {
  {
    TraceSpan span(Str(trace_event::kSend, meta.direction == Direction::kForward ? " fwd" : " bwd",
                       " m", meta.micro_batch),
                   "transfer");
    inner_.Send(meta, tensors, deadline);
  }
  if (recorder_) recorder_->Sent(channel_, meta, tensors);
}

TensorMessage ObservedReceiver::Receive(Deadline deadline) {
  const int64_t start = TracingOn() ? MonotonicMicros() : 0;
  TensorMessage m = inner_.Receive(deadline);
  // A ring slot read in place is on the device as its copy would be on a GPU.
  int64_t unowned = 0;
  for (const NamedTensor& t : m.tensors) {
    if (!t.tensor.is_cuda() && !CountedByAccounting(t.tensor)) unowned += t.tensor.nbytes();
  }
  if (unowned > 0) {
    ChargeUnowned(unowned);
    charged_.emplace_back(m.seq, unowned);
  }
  if (TracingOn()) {
    TraceComplete(
        Str(trace_event::kReceive, m.meta.direction == Direction::kForward ? " fwd" : " bwd", " m",
            m.meta.micro_batch),
        "transfer", start, MonotonicMicros());
  }
  return m;
}

void ObservedReceiver::Release(const TensorMessage& message) {
  inner_.Release(message);
  auto it = std::find_if(charged_.begin(), charged_.end(),
                         [&](const auto& c) { return c.first == message.seq; });
  if (it == charged_.end()) return;
  UnchargeUnowned(it->second);
  charged_.erase(it);
}

void ApplyTestHooks(const std::string& stage, StageWorker& worker) {
  const char* perturb = std::getenv("UP_TEST_PERTURB_DECODER");
  // The decoder, or its first part.
  if ((stage != "decoder" && stage != "decoder1") || !perturb || std::string(perturb) != "1")
    return;
  torch::NoGradGuard no_grad;
  for (auto& [name, t] : NamedState(worker.module())) {
    if (!t.is_floating_point() || name.find("weight") == std::string::npos) continue;
    t.view(-1)[0].add_(1e-3);
    LogWarn("TEST HOOK UP_TEST_PERTURB_DECODER=1: added 1e-3 to " + name + "[0]");
    return;
  }
}

}  // namespace up::stage
