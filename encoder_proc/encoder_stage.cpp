// See encoder_stage.h.
#include "encoder_proc/encoder_stage.h"

#include <chrono>

#include "common/checkpoint.h"
#include "common/deadline.h"
#include "common/device_memory.h"
#include "common/errors.h"
#include "common/logging.h"
#include "common/precision.h"
#include "common/test_hooks.h"
#include "common/trace.h"

namespace up {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

EncoderStage::EncoderStage(const Config& config, ipc::TensorSender& to_decoder,
                           ipc::TensorReceiver& from_decoder)
    : config_(config),
      to_decoder_(to_decoder),
      from_decoder_(from_decoder),
      device_(ParseDevice(config.pipeline.encoder.device, "pipeline.stages.encoder.device")),
      model_(config.model, EncoderInitSeed(config.train.seed)),
      optimizer_((model_->to(device_), *model_), config.train),
      data_(MakeDataset(config)),
      recompute_(config.pipeline.activations == "recompute") {
  model_->train();
  if (ShouldPark(config.pipeline.park, device_,
                 ParseDevice(config.pipeline.decoder.device, "pipeline.stages.decoder.device"))) {
    parking_ = std::make_unique<StageParking>(*model_, optimizer_.optimizer(), device_);
    parking_->Park();  // the device belongs to whoever holds the turn
  }
}

std::string EncoderStage::BoundarySignature() const { return up::BoundarySignature(config_); }

ipc::TurnReport EncoderStage::RunTurn(const ipc::TurnRequest& turn) {
  const auto start = Clock::now();
  ParkedOutsideTurn turn_guard(parking_.get());
  if (turn.step != step_) {
    optimizer_.BeginStep(turn.step);
    step_ = turn.step;
    backward_done_ = 0;
    kept_.clear();
    inputs_.clear();
  }
  ipc::TurnReport report;
  report.step = turn.step;
  for (const ipc::Action& a : turn.actions) {
    switch (a.op) {
      case ipc::Op::kForward:
        Forward(turn.step, a.micro_batch);
        break;
      case ipc::Op::kBackward:
        Backward(turn.step, a.micro_batch);
        if (++backward_done_ == config_.train.micro_batches)
          report.norms = [&] {
            torch::Tensor n = optimizer_.GradNorms();
            return std::vector<float>(n.data_ptr<float>(), n.data_ptr<float>() + n.numel());
          }();
        break;
      case ipc::Op::kStep: {
        TestHookPoint("encoder", "step", turn.step + 1);
        TraceSpan span(trace_event::kOptimizerStep, "compute");
        torch::Tensor own = optimizer_.GradNorms();                            // (P_enc,)
        torch::Tensor peer = torch::tensor(turn.peer_norms, torch::kFloat32);  // (P_dec,)
        optimizer_.Step(optimizer_.needs_global_norms() ? torch::cat({own, peer})
                                                        : own);  // encoder first
        break;
      }
      default:
        throw RuntimeError("encoder: action " + ipc::ActionName(a) + " is not an encoder action");
    }
  }
  report.busy_s = std::chrono::duration<double>(Clock::now() - start).count();
  return report;
}

void EncoderStage::Forward(int64_t step, int mb) {
  TraceSpan span(Str("forward m", mb), "compute");
  MicroBatch batch = LoadMicroBatch(*data_, config_, step, mb);
  Boundary out;  // bottleneck (n, 2F, S/2^L), skips[i] (n, F[i], S/2^i)
  AutocastScope autocast(config_.train, device_);
  if (recompute_) {
    torch::NoGradGuard no_graph;  // only the input is kept; B runs the forward again
    out = model_->forward(batch.images.to(device_));
    inputs_[mb] = batch.images;
  } else {
    out = model_->forward(batch.images.to(device_));
  }
  std::vector<ipc::NamedTensor> wire{{"bottleneck", out.bottleneck}};
  for (size_t i = 0; i < out.skips.size(); ++i)
    wire.push_back({"skip" + std::to_string(i), out.skips[i]});
  TestHookPoint("encoder", "forward", step + 1);
  to_decoder_.Send(
      {static_cast<uint64_t>(step), static_cast<uint32_t>(mb), ipc::Direction::kForward}, wire,
      After(config_.pipeline.timeout_s));
  if (!recompute_) kept_[mb] = std::move(out);
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

void EncoderStage::Save(const ipc::SaveRequest& request) {
  SaveStageFile(request.path, *model_, optimizer_.optimizer(), request.step);
}

void EncoderStage::Load(const std::string& path) {
  const int64_t step = LoadStageFile(path, *model_, optimizer_.optimizer());
  // The file's tensors arrive on the CPU: put the whole state where it lives.
  MoveTrainingState(*model_, optimizer_.optimizer(),
                    parking_ ? torch::Device(torch::kCPU) : device_);
  LogInfo(Str("resumed from ", path, " at step ", step));
}

}  // namespace up
