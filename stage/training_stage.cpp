// See training_stage.h.
#include "stage/training_stage.h"

#include <chrono>

#include "common/base/errors.h"
#include "common/base/logging.h"
#include "common/base/test_hooks.h"
#include "common/base/trace.h"
#include "common/device/device_memory.h"
#include "common/device/tensor_accounting.h"
#include "common/model/unet.h"
#include "common/training/checkpoint.h"

namespace up::stage {
namespace {

// Whether another stage of the run shares `spec`'s device (and node).
bool SharesDevice(const PipelineLayout& layout, const StageSpec& spec) {
  for (const StageSpec& o : layout.stages) {
    if (o.index != spec.index && o.node == spec.node &&
        ParseDevice(o.device, o.device_key) == ParseDevice(spec.device, spec.device_key))
      return true;
  }
  return false;
}

}  // namespace

TrainingStage::TrainingStage(const Config& config, const PipelineLayout& layout, int index,
                             std::shared_ptr<torch::nn::Module> module,
                             const std::vector<int>& positions, int half_parameters, int replica)
    : config_(config),
      layout_(layout),
      spec_(layout.stages.at(static_cast<size_t>(index))),
      device_(ParseDevice(spec_.device, spec_.device_key)),
      module_(std::move(module)),
      optimizer_((module_->to(device_), *module_), config.train),
      key_(ReplicaKey(spec_.Key(), replica)),
      name_(spec_.Name()),
      positions_(positions.begin(), positions.end()),
      half_parameters_(half_parameters) {
  module_->train();
  // Only the first stage reads images and the last masks; the ones between
  // take what their neighbours send.
  if (first() || last()) {
    data_ = MakeDataset(config);
    loader_ = std::make_unique<BatchLoader>(
        *data_, config, first() ? SampleParts::kImages : SampleParts::kMasks, replica);
  }
  if (first() || last()) validation_ = MakeValidationSet(config);
  if (ShouldPark(config.pipeline.park, device_, SharesDevice(layout_, spec_),
                 config.train.memory_budget > 0)) {
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
  if (loader_) report.data_wait_s = loader_->TakeWaitSeconds();
  report.busy_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

void TrainingStage::Idle() {
  if (!loader_) return;
  const bool cpu = device_.is_cpu();
  loader_->LoadAhead(config_.train.micro_batches, [cpu](MicroBatch* b) {
    if (!cpu) return;  // host memory already
    for (torch::Tensor* t : {&b->images, &b->masks})
      if (t->defined()) *t = UncountedCopy(*t);
  });
}

MicroBatch TrainingStage::Batch(int64_t step, int mb) {
  MicroBatch b = loader_->Get(step, mb);
  if (!device_.is_cpu()) return b;
  for (torch::Tensor* t : {&b.images, &b.masks})
    if (t->defined() && !CountedByAccounting(*t)) *t = t->clone();
  return b;
}

void TrainingStage::BackwardDone(ipc::TurnReport* report) {
  if (++backward_done_ != config_.train.micro_batches) return;
  if (replicas_) replicas_->SumGradients(*module_);  // before fp16's unscale and the norms
  optimizer_.Unscale();                      // fp16: the norms and the step see unscaled gradients
  torch::Tensor n = optimizer_.GradNorms();  // (P,)
  report->norms.assign(n.data_ptr<float>(), n.data_ptr<float>() + n.numel());
}

void TrainingStage::Step(const ipc::TurnRequest& turn, ipc::TurnReport* report) {
  TestHookPoint(key_, "step", turn.step + 1);
  // The optimizer's state waits in host memory through the turn's forward
  // and backward, off the device their activations need.
  if (parking_) parking_->UnparkOptimizer();
  TraceSpan span(trace_event::kOptimizerStep, "compute");
  torch::Tensor own = optimizer_.GradNorms();  // (P_own,)
  if (!optimizer_.needs_global_norms()) {
    Report(optimizer_.Step(own), report);
    return;
  }
  // The global norm and fp16's verdict see every stage's norms in the whole
  // model's order: the launcher's list with this stage's own put in its
  // places (a stage that steps in the turn of its last backward has not
  // reported them yet).
  std::vector<float> all = turn.all_norms;  // (P_all,)
  const size_t offset = spec_.encoder ? 0 : all.size() - static_cast<size_t>(half_parameters_);
  if (all.size() < static_cast<size_t>(half_parameters_) ||
      static_cast<size_t>(own.numel()) != positions_.size()) {
    throw RuntimeError(Str(name_, ": step ", turn.step + 1, " was given ", all.size(),
                           " gradient norms; its half alone has ", half_parameters_));
  }
  const float* mine = own.data_ptr<float>();
  for (size_t i = 0; i < positions_.size(); ++i)
    all[offset + static_cast<size_t>(positions_[i])] = mine[i];
  Report(optimizer_.Step(torch::tensor(all, torch::kFloat32)), report);
}

void TrainingStage::Report(const StageOptimizer::Outcome& outcome, ipc::TurnReport* report) {
  if (config_.train.precision == Precision::kFp16) {
    report->loss_scale = outcome.scale;
    report->skipped = outcome.skipped;
  }
}

const ValidationSet& TrainingStage::validation(const ipc::Action& action) const {
  if (!validation_) {
    throw RuntimeError(Str(name_, ": action ", ipc::ActionName(action),
                           " validates, but this run has no data.validation"));
  }
  return *validation_;
}

void TrainingStage::NotMine(const ipc::Action& action) const {
  throw RuntimeError(Str(name_, ": action ", ipc::ActionName(action), " is not one the ",
                         last() ? "last stage" : "stages before the last", " runs"));
}

void TrainingStage::JoinReplicas(const ReplicaGroupOptions& options) {
  replicas_ = std::make_unique<ReplicaGroup>(options, device_);
  LogInfo(Str("joined the ", options.replicas, " copies of the ", spec_.Key(), " as replica ",
              options.replica));
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
