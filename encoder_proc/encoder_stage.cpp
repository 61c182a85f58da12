// See encoder_stage.h.
#include "encoder_proc/encoder_stage.h"

#include "common/deadline.h"
#include "common/errors.h"
#include "common/logging.h"
#include "common/model/eval_mode.h"
#include "common/model/precision.h"
#include "common/test_hooks.h"
#include "common/trace.h"

namespace up {

EncoderStage::EncoderStage(const Config& config, ipc::TensorSender& to_decoder,
                           ipc::TensorReceiver& from_decoder)
    : TrainingStage(config, stage::Role::kEncoder, MakeEncoder(config).ptr()),
      to_decoder_(to_decoder),
      from_decoder_(from_decoder),
      model_(std::static_pointer_cast<UNetEncoderImpl>(module_)),
      recompute_(config.pipeline.activations == "recompute") {}

void EncoderStage::BeginStep() {
  kept_.clear();
  inputs_.clear();
}

void EncoderStage::RunAction(const ipc::Action& a, int64_t step, ipc::TurnReport* report) {
  switch (a.op) {
    case ipc::Op::kForward:
      Forward(step, a.micro_batch);
      break;
    case ipc::Op::kBackward:
      Backward(step, a.micro_batch);
      BackwardDone(report);
      break;
    case ipc::Op::kValForward:
      ValForward(step, a);
      break;
    default:
      NotMine(a);
  }
}

void EncoderStage::Forward(int64_t step, int mb) {
  TraceSpan span(Str("forward m", mb), "compute");
  MicroBatch batch = loader_->Get(step, mb);
  Boundary out;  // bottleneck (n, 2F, S/2^L), skips[i] (n, F[i], S/2^i)
  AutocastScope autocast(config_.train, device_);
  if (recompute_) {
    torch::NoGradGuard no_graph;  // only the input is kept; B runs the forward again
    out = model_->forward(batch.images.to(device_));
    inputs_[mb] = batch.images;
  } else {
    out = model_->forward(batch.images.to(device_));
  }
  TestHookPoint("encoder", "forward", step + 1);
  SendBoundary(step, mb, out);
  if (!recompute_) kept_[mb] = std::move(out);
}

void EncoderStage::SendBoundary(int64_t step, int mb, const Boundary& out) {
  std::vector<ipc::NamedTensor> wire{{"bottleneck", out.bottleneck}};
  for (size_t i = 0; i < out.skips.size(); ++i)
    wire.push_back({"skip" + std::to_string(i), out.skips[i]});
  to_decoder_.Send(
      {static_cast<uint64_t>(step), static_cast<uint32_t>(mb), ipc::Direction::kForward}, wire,
      After(config_.pipeline.timeout_s));
}

void EncoderStage::ValForward(int64_t step, const ipc::Action& a) {
  const ValidationSet& val = validation(a);
  const ValidationBatch& batch = val.Batch(a.micro_batch);
  TraceSpan span(Str("validation forward v", a.micro_batch), "compute");
  if (batch.case_index != val_case_) {
    val_windows_.emplace(val.cases->SpatialShape(batch.case_index), ValidationWindows(config_));
    val_image_ = val_windows_->Pad(
        val.cases->GetParts(batch.case_index, SampleParts::kImages).image.unsqueeze(0));
    val_case_ = batch.case_index;
  }
  const torch::Tensor windows =
      val_windows_->Windows(val_image_, batch.first, batch.count, val.batch);  // (n, C, *w)
  Boundary out;
  {
    EvalMode eval(*module_);
    AutocastScope autocast(config_.train, device_);
    out = model_->forward(windows.to(device_));
  }
  SendBoundary(step, a.micro_batch, out);
  if (batch.last) {
    val_case_ = -1;
    val_windows_.reset();
    val_image_ = torch::Tensor();
  }
}

Boundary EncoderStage::Recompute(int mb) {
  auto input = inputs_.find(mb);
  if (input == inputs_.end()) {
    throw RuntimeError("encoder: B" + std::to_string(mb) + " without F" + std::to_string(mb));
  }
  // The forward already updated BatchNorm's running statistics once; this
  // second pass must leave them as they are.
  std::vector<torch::Tensor> saved;
  for (const auto& b : model_->buffers()) saved.push_back(b.clone());
  Boundary out;
  {
    AutocastScope autocast(config_.train, device_);
    out = model_->forward(input->second.to(device_));
  }
  // set_data, not copy_: the graph just built saved these buffers, and an
  // in-place write would bump their version and void the backward.
  size_t i = 0;
  for (auto& b : model_->buffers()) b.set_data(saved[i++]);
  inputs_.erase(input);
  return out;
}

void EncoderStage::Backward(int64_t step, int mb) {
  if (recompute_) kept_[mb] = Recompute(mb);
  auto kept = kept_.find(mb);
  if (kept == kept_.end())
    throw RuntimeError("encoder: B" + std::to_string(mb) + " without F" + std::to_string(mb));
  TraceSpan span(Str("backward m", mb), "compute");
  ipc::TensorMessage grads = from_decoder_.Receive(After(config_.pipeline.timeout_s));
  if (grads.meta.step != static_cast<uint64_t>(step) ||
      grads.meta.micro_batch != static_cast<uint32_t>(mb) ||
      grads.meta.direction != ipc::Direction::kBackward ||
      grads.tensors.size() != 1 + kept->second.skips.size()) {
    throw RuntimeError("encoder: expected the gradients of step " + std::to_string(step) +
                       " micro-batch " + std::to_string(mb) + ", got step " +
                       std::to_string(grads.meta.step) + " micro-batch " +
                       std::to_string(grads.meta.micro_batch) + " with " +
                       std::to_string(grads.tensors.size()) + " tensors");
  }
  TestHookPoint("encoder", "backward", step + 1);
  std::vector<torch::Tensor> outputs{kept->second.bottleneck};
  for (const auto& s : kept->second.skips) outputs.push_back(s);
  std::vector<torch::Tensor> grad_values;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (grads.tensors[i].tensor.sizes() != outputs[i].sizes()) {
      throw RuntimeError("encoder: gradient '" + grads.tensors[i].name + "' has shape " +
                         c10::str(grads.tensors[i].tensor.sizes()) + ", expected " +
                         c10::str(outputs[i].sizes()));
    }
    grad_values.push_back(grads.tensors[i].tensor.to(device_));
  }
  torch::autograd::backward(outputs, grad_values);
  from_decoder_.Release(grads);
  kept_.erase(kept);
}

}  // namespace up
