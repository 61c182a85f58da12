// See decoder_stage.h.
#include "decoder_proc/decoder_stage.h"

#include "common/deadline.h"
#include "common/errors.h"
#include "common/logging.h"
#include "common/model/eval_mode.h"
#include "common/model/loss.h"
#include "common/model/precision.h"
#include "common/test_hooks.h"
#include "common/trace.h"

namespace up {

DecoderStage::DecoderStage(const Config& config, ipc::TensorSender& to_encoder,
                           ipc::TensorReceiver& from_encoder)
    : TrainingStage(config, stage::Role::kDecoder, MakeDecoder(config).ptr()),
      to_encoder_(to_encoder),
      from_encoder_(from_encoder),
      model_(std::static_pointer_cast<UNetDecoderImpl>(module_)),
      spec_(BoundaryShapes(config.model, config.data.size,
                           config.train.batch_size / config.train.micro_batches)),
      loss_(MakeLossSpec(config)) {}

void DecoderStage::RunAction(const ipc::Action& a, int64_t step, ipc::TurnReport* report) {
  if (a.op == ipc::Op::kValPredict) {
    ValPredict(step, a, report);
    return;
  }
  if (a.op != ipc::Op::kForwardBackward) NotMine(a);
  report->loss += ForwardBackward(step, a.micro_batch, &report->dice_counts);
  BackwardDone(report);
}

Boundary DecoderStage::ReceiveBoundary(int64_t step, int mb, ipc::TensorMessage* message) {
  ipc::TensorMessage& in = *message;
  in = from_encoder_.Receive(After(config_.pipeline.timeout_s));
  if (in.meta.step != static_cast<uint64_t>(step) ||
      in.meta.micro_batch != static_cast<uint32_t>(mb) ||
      in.meta.direction != ipc::Direction::kForward || in.tensors.size() != spec_.names.size()) {
    throw RuntimeError("decoder: expected the boundary of step " + std::to_string(step) +
                       " micro-batch " + std::to_string(mb) + ", got step " +
                       std::to_string(in.meta.step) + " micro-batch " +
                       std::to_string(in.meta.micro_batch) + " with " +
                       std::to_string(in.tensors.size()) + " tensors");
  }
  Boundary b;
  for (size_t i = 0; i < in.tensors.size(); ++i) {
    const torch::Tensor& t = in.tensors[i].tensor;
    if (in.tensors[i].name != spec_.names[i] || t.sizes().vec() != spec_.shapes[i]) {
      throw RuntimeError("decoder: boundary tensor " + std::to_string(i) + " is '" +
                         in.tensors[i].name + "' " + c10::str(t.sizes()) + ", expected '" +
                         spec_.names[i] + "' " + c10::str(spec_.shapes[i]));
    }
    // On the CPU it views the ring's slot, on a GPU it is a copy.
    (i == 0 ? b.bottleneck : b.skips.emplace_back()) = device_.is_cpu() ? t : t.to(device_);
  }
  return b;
}

void DecoderStage::ValPredict(int64_t step, const ipc::Action& a, ipc::TurnReport* report) {
  const ValidationSet& val = validation(a);
  const ValidationBatch& batch = val.Batch(a.micro_batch);
  TraceSpan span(Str("validation predict v", a.micro_batch), "compute");
  ipc::TensorMessage in;
  const Boundary b = ReceiveBoundary(step, a.micro_batch, &in);
  torch::Tensor logits;  // (n, K, *w)
  {
    EvalMode eval(*module_);
    AutocastScope autocast(config_.train, device_);
    logits = model_->forward(b)[0].to(torch::kFloat32);
  }
  from_encoder_.Release(in);
  if (batch.first == 0)
    val_blend_.emplace(val.cases->SpatialShape(batch.case_index), ValidationWindows(config_));
  if (!val_blend_)
    throw RuntimeError(Str("decoder: VP", a.micro_batch, " before its case's first"));
  val_blend_->Blend(batch.first, batch.count, logits);
  if (!batch.last) return;
  const torch::Tensor pred = val_blend_->Result().argmax(1).squeeze(0);  // (*S) int64
  val_blend_.reset();
  const torch::Tensor truth = val.cases->GetParts(batch.case_index, SampleParts::kMasks).mask;
  const std::vector<int64_t> counts = ValidationCounts(pred, truth, val.entries);
  report->val_counts.insert(report->val_counts.end(), counts.begin(), counts.end());
  ++report->val_cases;
}

double DecoderStage::ForwardBackward(int64_t step, int mb, std::vector<int64_t>* dice_counts) {
  TraceSpan span(Str("forward+backward m", mb), "compute");
  ipc::TensorMessage in;
  Boundary b = ReceiveBoundary(step, mb, &in);
  // Autograd leaves: their gradients are what goes back to the encoder.
  b.bottleneck.requires_grad_(true);
  for (torch::Tensor& s : b.skips) s.requires_grad_(true);
  MicroBatch batch = loader_->Get(step, mb);
  torch::Tensor masks = batch.masks.to(device_);  // (n, *S)
  std::vector<torch::Tensor> outputs;             // [0]: (n, K, *S); deep supervision: coarser ones
  torch::Tensor loss;                             // ()
  {
    AutocastScope autocast(config_.train, device_);
    outputs = model_->forward(b);
    loss = SegmentationLoss(outputs, masks, loss_) / config_.train.micro_batches;
  }
  TestHookPoint("decoder", "forward", step + 1);
  ScaledBackward(loss, optimizer_.loss_scale());  // fp16: the boundary's gradients go back scaled
  TestHookPoint("decoder", "backward", step + 1);

  std::vector<ipc::NamedTensor> grads;
  for (size_t i = 0; i < in.tensors.size(); ++i) {
    const torch::Tensor& leaf = i == 0 ? b.bottleneck : b.skips[i - 1];
    grads.push_back({in.tensors[i].name, leaf.grad()});
  }
  to_encoder_.Send(
      {static_cast<uint64_t>(step), static_cast<uint32_t>(mb), ipc::Direction::kBackward}, grads,
      After(config_.pipeline.timeout_s));
  from_encoder_.Release(in);

  DiceCounter dice(config_.model.num_classes);
  dice.Add(outputs[0], masks);
  if (dice_counts->empty()) dice_counts->assign(dice.counts().size(), 0);
  for (size_t i = 0; i < dice.counts().size(); ++i) (*dice_counts)[i] += dice.counts()[i];
  const double value = loss.item<double>();
  if (on_loss) on_loss(step, mb, value);
  return value;
}

}  // namespace up
