// See part_stage.h.
#include "stage/part_stage.h"

#include "common/base/deadline.h"
#include "common/base/errors.h"
#include "common/base/logging.h"
#include "common/base/test_hooks.h"
#include "common/base/trace.h"
#include "common/model/eval_mode.h"
#include "common/model/precision.h"
#include "common/training/part_backward.h"

namespace up::stage {

PartStage::PartStage(const StageContext& ctx, std::shared_ptr<torch::nn::Module> module,
                     const std::vector<int>& positions, int half_parameters)
    : TrainingStage(ctx.config, ctx.layout, ctx.stage, std::move(module), positions,
                    half_parameters, ctx.replica),
      recompute_(ctx.config.pipeline.activations == Activations::kRecompute),
      parking_(ctx.config, device_),
      loss_(MakeLossSpec(ctx.config)) {
  for (const ChannelEnds& ends : ctx.channels) {
    const StageChannel* channel = &layout_.channels.at(static_cast<size_t>(ends.channel));
    Link link{channel, ends.sender, ends.receiver};
    if (channel->to == spec_.index) {
      upstream_.push_back(link);
    } else if (channel->from == spec_.index) {
      downstream_.push_back(link);
    } else {
      throw RuntimeError(Str(name(), ": given channel ", channel->from, ">", channel->to,
                             ", which does not touch it"));
    }
  }
  if (upstream_.size() != layout_.Into(spec_.index).size() ||
      downstream_.size() != layout_.OutOf(spec_.index).size()) {
    throw RuntimeError(Str(name(), ": given ", ctx.channels.size(), " channels of the ",
                           layout_.Into(spec_.index).size() + layout_.OutOf(spec_.index).size(),
                           " it has"));
  }
}

void PartStage::ParkReceived(Inputs& inputs) {
  parking_.Park(&inputs.host, [&] { ReleaseSlots(inputs); });
}

CheckpointUnit PartStage::recompute_unit() const {
  return recompute_ ? CheckpointUnitOf(config_.pipeline.recompute_unit) : CheckpointUnit::kNone;
}

void PartStage::BeginStep() {
  for (auto& [mb, kept] : kept_) Release(kept.inputs);
  kept_.clear();
  parking_.EndBackward();
}

void PartStage::RunAction(const ipc::Action& a, int64_t step, ipc::TurnReport* report) {
  switch (a.op) {
    case ipc::Op::kForward:
      if (last()) NotMine(a);
      Forward(step, a.micro_batch);
      break;
    case ipc::Op::kBackward:
      if (last()) NotMine(a);
      Backward(step, a.micro_batch);
      BackwardDone(report);
      break;
    case ipc::Op::kForwardBackward:
      if (!last()) NotMine(a);
      report->loss += ForwardBackward(step, a.micro_batch, &report->dice_counts);
      BackwardDone(report);
      break;
    case ipc::Op::kValForward:
      if (last()) NotMine(a);
      ValForward(step, a);
      break;
    case ipc::Op::kValPredict:
      if (!last()) NotMine(a);
      ValPredict(step, a, report);
      break;
    default:
      NotMine(a);
  }
}

ipc::TensorMessage PartStage::ReceiveChecked(Link& link, int64_t step, int mb,
                                             ipc::Direction direction) {
  const bool forward = direction == ipc::Direction::kForward;
  const int peer = forward ? link.channel->from : link.channel->to;
  const std::string what = forward ? "tensors" : "gradients";
  const std::string from = layout_.stages[static_cast<size_t>(peer)].Name();
  ipc::TensorMessage m = link.receiver->Receive(After(config_.pipeline.timeout_s));
  const std::vector<WireTensor>& want = link.channel->tensors;
  if (m.meta.step != static_cast<uint64_t>(step) ||
      m.meta.micro_batch != static_cast<uint32_t>(mb) || m.meta.direction != direction ||
      m.tensors.size() != want.size()) {
    throw RuntimeError(Str(name(), ": expected the ", what, " of step ", step, " micro-batch ", mb,
                           " from the ", from, ", got step ", m.meta.step, " micro-batch ",
                           m.meta.micro_batch, " with ", m.tensors.size(), " tensors"));
  }
  for (size_t i = 0; i < want.size(); ++i) {
    const torch::Tensor& t = m.tensors[i].tensor;
    if (m.tensors[i].name != want[i].name || t.sizes().vec() != want[i].shape) {
      throw RuntimeError(Str(name(), ": ", what, " tensor ", i, " from the ", from, " is '",
                             m.tensors[i].name, "' ", t.sizes(), ", expected '", want[i].name, "' ",
                             c10::IntArrayRef(want[i].shape)));
    }
  }
  return m;
}

PartStage::Inputs PartStage::Receive(int64_t step, int mb) {
  Inputs in;
  for (Link& link : upstream_) {
    ipc::TensorMessage m = ReceiveChecked(link, step, mb, ipc::Direction::kForward);
    for (const ipc::NamedTensor& t : m.tensors) in.host[t.name] = t.tensor;
    in.held.emplace_back(&link, std::move(m));
  }
  ParkReceived(in);  // pipeline.offload: outside the device until their level runs
  return in;
}

PartTensors PartStage::OnDevice(const PartTensors& host, bool leaves) const {
  return parking_.Leaves(host, leaves);
}

void PartStage::ReleaseSlots(Inputs& inputs) {
  for (auto& [link, message] : inputs.held) link->receiver->Release(message);
  inputs.held.clear();
}

void PartStage::Release(Inputs& inputs) {
  ReleaseSlots(inputs);
  inputs.host.clear();
}

void PartStage::SendOutputs(int64_t step, int mb, const PartTensors& outputs) {
  for (Link& link : downstream_) {
    std::vector<ipc::NamedTensor> wire;
    for (const WireTensor& t : link.channel->tensors) wire.push_back({t.name, outputs.at(t.name)});
    link.sender->Send(
        {static_cast<uint64_t>(step), static_cast<uint32_t>(mb), ipc::Direction::kForward}, wire,
        After(config_.pipeline.timeout_s));
  }
}

void PartStage::SendGradients(int64_t step, int mb, const PartTensors& used) {
  for (Link& link : upstream_) {
    std::vector<ipc::NamedTensor> wire;
    for (const WireTensor& t : link.channel->tensors) {
      const torch::Tensor& leaf = used.at(t.name);
      wire.push_back({t.name, leaf.grad().defined() ? leaf.grad() : torch::zeros_like(leaf)});
    }
    link.sender->Send(
        {static_cast<uint64_t>(step), static_cast<uint32_t>(mb), ipc::Direction::kBackward}, wire,
        After(config_.pipeline.timeout_s));
  }
}

void PartStage::Forward(int64_t step, int mb) {
  TraceSpan span(Str("forward m", mb), "compute");
  Kept kept;
  if (first()) {
    // pipeline.offload: the images stay in host memory until their level
    // runs (ParkReceived), so they need no copy onto the device first.
    kept.inputs.host[kImages] = parking_.on() ? loader_->Get(step, mb).images  // (n, C, *S)
                                              : Batch(step, mb).images;
    ParkReceived(kept.inputs);
  } else {
    kept.inputs = Receive(step, mb);
  }
  PartTensors out;
  // Offloaded, F builds the graph of the part's units at once: each unit's
  // input goes to host memory as it runs, so the device keeps nothing of the
  // micro-batch and B need not run the forward again.
  const bool units_now = recompute_ && parking_.on();
  {
    AutocastScope autocast(config_.train, device_);
    if (recompute_ && !units_now) {
      torch::NoGradGuard no_graph;  // only the inputs are kept; B runs the forward again
      out = Compute(OnDevice(kept.inputs.host, false));
    } else {
      kept.used = OnDevice(kept.inputs.host, true);
      kept.parked_from = parking_.offload() ? parking_.offload()->Next() : 0;
      out = Compute(kept.used);
      kept.parked_end = parking_.offload() ? parking_.offload()->Next() : 0;
    }
  }
  TestHookPoint(key(), "forward", step + 1);
  SendOutputs(step, mb, out);
  if (units_now) {
    for (const auto& [name, t] : out) kept.edges.emplace(name, EdgeOf(t));
  } else if (!recompute_) {
    kept.outputs = std::move(out);
  }
  kept_[mb] = std::move(kept);
}

PartTensors PartStage::Recompute(const PartTensors& used) {
  // The forward already updated BatchNorm's running statistics once; this
  // second pass must leave them as they are.
  std::vector<torch::Tensor> saved;
  for (const auto& b : module_->buffers()) saved.push_back(b.clone());
  PartTensors out;
  {
    AutocastScope autocast(config_.train, device_);
    out = Compute(used);
  }
  // set_data, not copy_: the graph just built saved these buffers, and an
  // in-place write would bump their version and void the backward.
  size_t i = 0;
  for (auto& b : module_->buffers()) b.set_data(saved[i++]);
  return out;
}

void PartStage::Backward(int64_t step, int mb) {
  auto found = kept_.find(mb);
  if (found == kept_.end()) throw RuntimeError(Str(name(), ": B", mb, " without F", mb));
  Kept& kept = found->second;
  const bool units_kept = !kept.edges.empty();  // F built them (offloaded)
  if (recompute_ && !units_kept) {
    kept.used = OnDevice(kept.inputs.host, true);
    kept.outputs = Recompute(kept.used);
  }
  TraceSpan span(Str("backward m", mb), "compute");
  std::vector<OutputEdge> outputs;
  std::vector<torch::Tensor> grads;  // where they lie (ring slots, or parked)
  std::vector<std::pair<Link*, ipc::TensorMessage>> received;
  for (Link& link : downstream_) {
    ipc::TensorMessage g = ReceiveChecked(link, step, mb, ipc::Direction::kBackward);
    for (size_t i = 0; i < g.tensors.size(); ++i) {
      const std::string& name = link.channel->tensors[i].name;
      outputs.push_back(units_kept ? kept.edges.at(name) : EdgeOf(kept.outputs.at(name)));
      grads.push_back(g.tensors[i].tensor);
    }
    received.emplace_back(&link, std::move(g));
  }
  auto release = [&] {
    for (auto& [link, g] : received) link->receiver->Release(g);
    received.clear();
  };
  parking_.ParkGradients(&grads, release);  // pipeline.offload: outside the device until used
  kept.outputs.clear();                     // the graph keeps what it needs of their values
  kept.edges.clear();
  TestHookPoint(key(), "backward", step + 1);
  // A skip sent to two stages is here twice: its gradients are summed.
  PartBackward(outputs, grads,
               [this](const torch::Tensor& g) { return parking_.GradientToDevice(g); });
  outputs.clear();
  if (units_kept) {
    parking_.offload()->Release(kept.parked_from, kept.parked_end);  // this micro-batch's units
  } else {
    parking_.EndBackward();
  }
  grads.clear();
  release();
  SendGradients(step, mb, kept.used);
  Release(kept.inputs);
  kept_.erase(found);
}

double PartStage::ForwardBackward(int64_t step, int mb, std::vector<int64_t>* dice_counts) {
  TraceSpan span(Str("forward+backward m", mb), "compute");
  Inputs in = Receive(step, mb);
  const PartTensors used = OnDevice(in.host, true);
  MicroBatch batch = Batch(step, mb);
  torch::Tensor masks = batch.masks.to(device_);             // (n, *S)
  std::vector<torch::Tensor> outputs(loss_.weights.size());  // [0]: (n, K, *S); coarser ones
  torch::Tensor loss;                                        // ()
  {
    AutocastScope autocast(config_.train, device_);
    const PartTensors out = Compute(used);
    // The loss's outputs: this part's heads and those sent by the parts before it.
    for (size_t i = 0; i < outputs.size(); ++i) {
      const std::string logits = "logits" + std::to_string(i);
      if (auto o = out.find(logits); o != out.end()) {
        outputs[i] = o->second;
      } else if (auto u = used.find(logits); u != used.end()) {
        outputs[i] = parking_.ToDevice(u->second);
      }
    }
    loss = SegmentationLoss(outputs, masks, loss_) / BatchMicroBatches(config_);
  }
  TestHookPoint(key(), "forward", step + 1);
  ScaledBackward(loss, optimizer_.loss_scale());  // fp16: the gradients go back scaled
  parking_.EndBackward();
  TestHookPoint(key(), "backward", step + 1);
  SendGradients(step, mb, used);
  Release(in);

  DiceCounter dice(config_.model);
  dice.Add(outputs[0], masks);
  if (dice_counts->empty()) dice_counts->assign(dice.counts().size(), 0);
  for (size_t i = 0; i < dice.counts().size(); ++i) (*dice_counts)[i] += dice.counts()[i];
  const double value = loss.item<double>();
  if (on_loss) on_loss(step, mb, value);
  return value;
}

void PartStage::ValForward(int64_t step, const ipc::Action& a) {
  TraceSpan span(Str("validation forward v", a.micro_batch), "compute");
  Inputs in;
  bool case_done = false;
  if (first()) {
    const ValidationSet& val = validation(a);
    const ValidationBatch& batch = val.Batch(a.micro_batch);
    if (batch.case_index != val_case_) {
      val_windows_.emplace(val.cases->SpatialShape(batch.case_index), ValidationWindows(config_));
      val_image_ = val_windows_->Pad(
          val.cases->GetParts(batch.case_index, SampleParts::kImages).image.unsqueeze(0));
      val_case_ = batch.case_index;
    }
    in.host[kImages] =
        val_windows_->Windows(val_image_, batch.first, batch.count, val.batch);  // (n, C, *w)
    case_done = batch.last;
  } else {
    in = Receive(step, a.micro_batch);
  }
  PartTensors out;
  {
    EvalMode eval(*module_);
    AutocastScope autocast(config_.train, device_);
    out = Compute(OnDevice(in.host, false));
  }
  SendOutputs(step, a.micro_batch, out);
  Release(in);
  if (case_done) {
    val_case_ = -1;
    val_windows_.reset();
    val_image_ = torch::Tensor();
  }
}

void PartStage::ValPredict(int64_t step, const ipc::Action& a, ipc::TurnReport* report) {
  const ValidationSet& val = validation(a);
  const ValidationBatch& batch = val.Batch(a.micro_batch);
  TraceSpan span(Str("validation predict v", a.micro_batch), "compute");
  Inputs in = Receive(step, a.micro_batch);
  torch::Tensor logits;  // (n, K, *w)
  {
    EvalMode eval(*module_);
    AutocastScope autocast(config_.train, device_);
    logits = Compute(OnDevice(in.host, false)).at("logits0").to(torch::kFloat32);
  }
  Release(in);
  if (batch.first == 0)
    val_blend_.emplace(val.cases->SpatialShape(batch.case_index), ValidationWindows(config_));
  if (!val_blend_)
    throw RuntimeError(Str(name(), ": VP", a.micro_batch, " before its case's first"));
  val_blend_->Blend(batch.first, batch.count, logits);
  if (!batch.last) return;
  const torch::Tensor pred =
      PredictedClasses(val_blend_->Result(), config_.model).squeeze(0);  // (*S) int64
  val_blend_.reset();
  const torch::Tensor truth = val.cases->GetParts(batch.case_index, SampleParts::kMasks).mask;
  const std::vector<int64_t> counts = ValidationCounts(pred, truth, val.entries);
  report->val_counts.insert(report->val_counts.end(), counts.begin(), counts.end());
  ++report->val_cases;
}

}  // namespace up::stage
