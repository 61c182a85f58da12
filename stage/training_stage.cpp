// See training_stage.h.
#include "stage/training_stage.h"

#include <chrono>

#include "common/errors.h"
#include "common/logging.h"
#include "common/model/checkpoint.h"
#include "common/model/device_memory.h"
#include "common/model/tensor_accounting.h"
#include "common/model/unet.h"
#include "common/test_hooks.h"
#include "common/trace.h"

namespace up::stage {
namespace {

torch::Device StageDevice(const Config& config, Role role) {
  return role == Role::kEncoder
             ? ParseDevice(config.pipeline.encoder.device, "pipeline.stages.encoder.device")
             : ParseDevice(config.pipeline.decoder.device, "pipeline.stages.decoder.device");
}

}  // namespace

TrainingStage::TrainingStage(const Config& config, Role role,
                             std::shared_ptr<torch::nn::Module> module)
    : config_(config),
      role_(role),
      device_(StageDevice(config, role)),
      module_(std::move(module)),
      optimizer_((module_->to(device_), *module_), config.train),
      data_(MakeDataset(config)),
      validation_(MakeValidationSet(config)),
      loader_(std::make_unique<BatchLoader>(
          *data_, config, role == Role::kEncoder ? SampleParts::kImages : SampleParts::kMasks)) {
  module_->train();
  if (ShouldPark(config.pipeline.park, StageDevice(config, Role::kEncoder),
                 StageDevice(config, Role::kDecoder), config.train.memory_budget > 0)) {
    parking_ = std::make_unique<StageParking>(*module_, optimizer_.optimizer(), device_);
    parking_->Park();  // the device belongs to whoever holds the turn
  }
}

std::string TrainingStage::BoundarySignature() const { return up::BoundarySignature(config_); }

ipc::TurnReport TrainingStage::RunTurn(const ipc::TurnRequest& turn) {
  const auto start = std::chrono::steady_clock::now();
  ParkedOutsideTurn turn_guard(parking_.get());
  if (turn.step != step_) {
    optimizer_.BeginStep(turn.step);
    step_ = turn.step;
    backward_done_ = 0;
    BeginStep();
  }
  ipc::TurnReport report;
  report.step = turn.step;
  const std::string actions = ipc::ActionsText(turn.actions);
  for (const ipc::Action& a : turn.actions) {
    SetMemoryPlace(Str("step ", turn.step + 1, ", turn [", actions, "], ",
                       a.op == ipc::Op::kStep ? std::string("optimizer step")
                                              : Str("micro-batch ", a.micro_batch)));
    if (a.op == ipc::Op::kStep) {
      // The step's own peak apart from the work before it (memory_probe.h).
      report.compute_peak_tensor_bytes =
          std::max(report.compute_peak_tensor_bytes, TakeTensorBytes(device_).peak);
      Step(turn, &report);
      report.step_peak_tensor_bytes =
          std::max(report.step_peak_tensor_bytes, TakeTensorBytes(device_).peak);
    } else {
      RunAction(a, turn.step, &report);
    }
  }
  report.compute_peak_tensor_bytes =
      std::max(report.compute_peak_tensor_bytes, TensorBytesOn(device_).peak);
  report.data_wait_s = loader_->TakeWaitSeconds();
  report.busy_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

void TrainingStage::BackwardDone(ipc::TurnReport* report) {
  if (++backward_done_ != config_.train.micro_batches) return;
  optimizer_.Unscale();                      // fp16: the norms and the step see unscaled gradients
  torch::Tensor n = optimizer_.GradNorms();  // (P,)
  report->norms.assign(n.data_ptr<float>(), n.data_ptr<float>() + n.numel());
}

void TrainingStage::Step(const ipc::TurnRequest& turn, ipc::TurnReport* report) {
  TestHookPoint(name(), "step", turn.step + 1);
  TraceSpan span(trace_event::kOptimizerStep, "compute");
  torch::Tensor own = optimizer_.GradNorms();                            // (P_own,)
  torch::Tensor peer = torch::tensor(turn.peer_norms, torch::kFloat32);  // (P_peer,)
  // The global norm and fp16's verdict see every parameter in pipeline
  // order: encoder first.
  const StageOptimizer::Outcome outcome = !optimizer_.needs_global_norms() ? optimizer_.Step(own)
                                          : role_ == Role::kEncoder
                                              ? optimizer_.Step(torch::cat({own, peer}))
                                              : optimizer_.Step(torch::cat({peer, own}));
  if (config_.train.precision == "fp16") {
    report->loss_scale = outcome.scale;
    report->skipped = outcome.skipped;
  }
}

const ValidationSet& TrainingStage::validation(const ipc::Action& action) const {
  if (!validation_) {
    throw RuntimeError(Str(name(), ": action ", ipc::ActionName(action),
                           " validates, but this run has no data.validation"));
  }
  return *validation_;
}

void TrainingStage::NotMine(const ipc::Action& action) const {
  throw RuntimeError(Str(name(), ": action ", ipc::ActionName(action), " is not ",
                         role_ == Role::kEncoder ? "an " : "a ", name(), " action"));
}

void TrainingStage::Prefetch() {
  if (parking_) parking_->Prefetch();
}

void TrainingStage::Save(const ipc::SaveRequest& request) {
  SaveStageFile(request.path, *module_, optimizer_.optimizer(), request.step,
                &optimizer_.loss_scale_state());
}

void TrainingStage::Load(const std::string& path) {
  SetMemoryPlace("loading " + path);
  const int64_t step =
      LoadStageFile(path, *module_, optimizer_.optimizer(), &optimizer_.loss_scale_state());
  // The file's tensors arrive on the CPU: put the whole state where it lives.
  MoveTrainingState(*module_, optimizer_.optimizer(),
                    parking_ ? torch::Device(torch::kCPU) : device_);
  LogInfo(Str("resumed from ", path, " at step ", step));
}

}  // namespace up::stage
