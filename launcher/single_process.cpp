// See single_process.h.
#include "launcher/single_process.h"

#include <chrono>
#include <filesystem>
#include <optional>
#include <utility>

#include "common/base/errors.h"
#include "common/base/json_writer.h"
#include "common/base/logging.h"
#include "common/base/proc_stats.h"
#include "common/data/batch_loader.h"
#include "common/data/dataset.h"
#include "common/data/validation_split.h"
#include "common/device/device_memory.h"
#include "common/device/out_of_memory.h"
#include "common/device/tensor_accounting.h"
#include "common/model/activation_offload.h"
#include "common/model/digest.h"
#include "common/model/eval_mode.h"
#include "common/model/loss.h"
#include "common/model/precision.h"
#include "common/model/sliding_window.h"
#include "common/model/unet.h"
#include "common/training/replica_gradients.h"
#include "common/training/stage_optimizer.h"
#include "common/training/stage_parking.h"
#include "launcher/progress.h"
#include "launcher/stop_signal.h"

namespace up {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// The device's total for this one process: CPU tensors are charged to it
// (and refused past `train.memory_budget`) while it lives. Declared before
// every tensor of the run, so it outlives them.
class ProcessDeviceBudget {
 public:
  ProcessDeviceBudget(const torch::Device& device, int64_t budget) {
    ApplyMemoryBudget(device, budget);
    budget_.budget = budget;
    if (!device.is_cuda()) UseDeviceBudget(&budget_);
  }
  ~ProcessDeviceBudget() {
    if (CurrentDeviceBudget() == &budget_) UseDeviceBudget(nullptr);
  }
  ProcessDeviceBudget(const ProcessDeviceBudget&) = delete;
  ProcessDeviceBudget& operator=(const ProcessDeviceBudget&) = delete;

 private:
  DeviceBudget budget_;
};

TrainSummary Train(const Config& config, RunDir& run, const std::optional<CheckpointRef>& resume,
                   const torch::Device& device);

// One validation pass over `val`'s plan, with the batches and the arithmetic
// of the pipeline's VF and VP: each case's counts, in plan order.
std::vector<std::vector<int64_t>> Validate(UNet& model, const ValidationSet& val,
                                           const Config& config, const torch::Device& device) {
  std::vector<std::vector<int64_t>> cases;
  std::optional<SlidingWindow> windows;
  torch::Tensor image;  // (1, C, *P)
  EvalMode eval(*model);
  for (size_t v = 0; v < val.plan.size(); ++v) {
    const ValidationBatch& batch = val.plan[v];
    SetMemoryPlace(Str("validation batch ", v));
    if (batch.first == 0) {
      windows.emplace(val.cases->SpatialShape(batch.case_index), ValidationWindows(config));
      image = windows->Pad(
          val.cases->GetParts(batch.case_index, SampleParts::kImages).image.unsqueeze(0));
    }
    const torch::Tensor x = windows->Windows(image, batch.first, batch.count, val.batch);
    torch::Tensor logits;  // (n, K, *w)
    {
      AutocastScope autocast(config.train, device);
      const Boundary b = model->encoder->forward(x.to(device));
      logits = model->decoder->forward(b)[0].to(torch::kFloat32);
    }
    windows->Blend(batch.first, batch.count, logits);
    if (!batch.last) continue;
    const torch::Tensor pred =
        PredictedClasses(windows->Result(), config.model).squeeze(0);  // (*S)
    const torch::Tensor truth = val.cases->GetParts(batch.case_index, SampleParts::kMasks).mask;
    cases.push_back(ValidationCounts(pred, truth, val.entries));
  }
  return cases;
}

}  // namespace

TrainSummary RunSingleProcess(const Config& config, RunDir& run,
                              const std::optional<CheckpointRef>& resume) {
  // The whole model on the encoder's device (the pipeline's placement of one half).
  const torch::Device device =
      ParseDevice(config.pipeline.encoder.device, "pipeline.stages.encoder.device");
  ApplyMemoryCapFromEnv(device);
  ProcessDeviceBudget budget(device, config.train.memory_budget);
  try {
    return Train(config, run, resume, device);
  } catch (const c10::OutOfMemoryError& e) {
    throw RuntimeError(OutOfMemoryLine("single-process trainer", e, config, true));
  }
}

namespace {

TrainSummary Train(const Config& config, RunDir& run, const std::optional<CheckpointRef>& resume,
                   const torch::Device& device) {
  const TrainConfig& t = config.train;
  UNet model(config.model, t.seed, t.deep_supervision);
  const LossSpec loss_spec = MakeLossSpec(config);
  model->encoder->set_checkpointing(CheckpointUnitOf(t.checkpointing));
  model->decoder->set_checkpointing(CheckpointUnitOf(t.checkpointing));
  model->to(device);
  model->train();
  // train.offload: what checkpointing keeps waits in host memory.
  std::unique_ptr<ActivationOffload> offload;
  if (t.offload == OnOff::kOn) {
    offload = std::make_unique<ActivationOffload>(device);
    model->encoder->set_offload(offload.get());
    model->decoder->set_offload(offload.get());
  }
  StageOptimizer enc_opt(*model->encoder, t);
  StageOptimizer dec_opt(*model->decoder, t);
  auto data = MakeDataset(config);
  const std::unique_ptr<ValidationSet> validation = MakeValidationSet(config);
  BatchLoader loader(*data, config, SampleParts::kBoth);
  std::optional<ReplicaGradientSum> replica_sum;
  if (config.pipeline.replicas > 1) replica_sum.emplace(model->parameters());

  int64_t start = 0;
  if (resume) {
    CheckStageFiles(resume->dir, {"encoder.pt", "decoder.pt"});  // the two halves whole
    SetMemoryPlace("loading " + resume->dir);
    start = LoadStageFile((fs::path(resume->dir) / "encoder.pt").string(), *model->encoder,
                          enc_opt.optimizer(), &enc_opt.loss_scale_state());
    LoadStageFile((fs::path(resume->dir) / "decoder.pt").string(), *model->decoder,
                  dec_opt.optimizer(), &dec_opt.loss_scale_state());
    LogInfo(Str("resuming from ", resume->dir, " at step ", start));
  }

  Progress progress("single-process", t.steps);
  SkipWatch skips;
  TrainSummary summary;
  if (resume) summary.best = RecallBestValidation(run.path());  // best stays best
  const auto wall_start = Clock::now();
  int64_t completed = start;
  // The peak is reset around each optimizer step, to measure the two phases
  // apart: the run's is the largest of them.
  TensorBytes run_peak = TensorBytesOn(device);
  PhasePeaks phases;
  for (int64_t step = start; step < t.steps; ++step) {
    const auto step_start = Clock::now();
    enc_opt.BeginStep(step);
    dec_opt.BeginStep(step);
    DiceCounter dice(config.model);
    double loss_sum = 0;
    for (int mb = 0; mb < BatchMicroBatches(config); ++mb) {
      SetMemoryPlace(Str("step ", step + 1, ", micro-batch ", mb));
      MicroBatch batch = loader.Get(step, mb);
      torch::Tensor masks = batch.masks.to(device);  // (n, *S)
      std::vector<torch::Tensor> outputs;  // [0]: (n, K, *S); deep supervision: coarser ones
      torch::Tensor loss;                  // ()
      {
        AutocastScope autocast(t, device);
        // The batch lets its images go: the first unit keeps them as long as
        // backward needs them (parked in host memory with train.offload). On
        // a CPU device `.to(device)` is the batch's own tensor, which would
        // otherwise stay on the device through the backward beside the copy
        // the offload fetches back for that unit.
        outputs = model->forward(std::exchange(batch.images, torch::Tensor()).to(device));
        loss = SegmentationLoss(outputs, masks, loss_spec) / BatchMicroBatches(config);
      }
      ScaledBackward(loss, dec_opt.loss_scale());  // fp16: both halves hold the same scale
      if (offload) offload->Clear();
      loss_sum += loss.item<double>();
      dice.Add(outputs[0], masks);
      // pipeline.replicas: each replica's micro-batches sum apart, then the
      // replicas' sums in replica order, as the replicas' exchange adds them.
      if (replica_sum && (mb + 1) % t.micro_batches == 0) replica_sum->EndReplica();
    }
    if (replica_sum) replica_sum->Finish();
    SetMemoryPlace(Str("step ", step + 1, ", optimizer step"));
    const TensorBytes compute = TakeTensorBytes(device);
    run_peak.Merge(compute);
    phases.compute = std::max(phases.compute, compute.peak);
    enc_opt.Unscale();  // fp16: norms, clipping and the verdict see unscaled gradients
    dec_opt.Unscale();
    torch::Tensor norms =
        torch::cat({enc_opt.GradNorms(), dec_opt.GradNorms()});  // (P_enc + P_dec,)
    const StageOptimizer::Outcome outcome = enc_opt.Step(norms);
    dec_opt.Step(norms);
    const TensorBytes stepped = TakeTensorBytes(device);
    run_peak.Merge(stepped);
    phases.step = std::max(phases.step, stepped.peak);
    const double step_s = Seconds(step_start, Clock::now());
    std::optional<Fp16Record> fp16;
    if (t.precision == Precision::kFp16) fp16 = skips.Note(step, outcome.scale, outcome.skipped);

    const StepEnd end = DecideStepEnd(config, step);
    std::optional<ValidationRecord> val;
    bool best = false;
    if (end.validate) {
      const auto val_start = Clock::now();
      const auto cases = Validate(model, *validation, config, device);
      val = FinishValidation(cases, validation->entries, step, Seconds(val_start, Clock::now()),
                             &summary, &best);
      progress.Validated(val->scores.mean);
    }
    AppendStepMetrics(run, t, step, loss_sum, dice.Mean(), step_s, loader.TakeWaitSeconds(), fp16,
                      val ? &*val : nullptr);
    const TensorBytes tensors_now = TensorBytesOn(device);
    progress.Step(step + 1, loss_sum, dice.Mean(), t.batch_size / step_s,
                  Str("rss: trainer ", CurrentRssBytes() >> 20, " MiB  tensors: ",
                      tensors_now.live >> 20, "/", run_peak.peak >> 20, " MiB (live/peak)",
                      device.is_cuda() ? Str("  device peak: ", run_peak.peak >> 20, " MiB")
                                       : std::string()));
    summary.final_loss = loss_sum;

    if (end.checkpoint || best) {
      const std::string staging = BeginCheckpoint(run.path(), step + 1);
      StagingCleanup unless_committed(staging);
      SaveStageFile((fs::path(staging) / "encoder.pt").string(), *model->encoder,
                    enc_opt.optimizer(), step + 1, &enc_opt.loss_scale_state());
      SaveStageFile((fs::path(staging) / "decoder.pt").string(), *model->decoder,
                    dec_opt.optimizer(), step + 1, &dec_opt.loss_scale_state());
      CommitCheckpoint(run.path(), staging, step + 1, {"encoder.pt", "decoder.pt"}, config);
    }
    if (best) KeepBestCheckpoint(run.path(), step + 1);
    completed = step + 1;
    if (end.stopping) {
      WarnStopped(completed, run);
      break;
    }
  }
  summary.wall_s = Seconds(wall_start, Clock::now());
  summary.SetThroughput(start, completed, t.batch_size);
  summary.param_digest = ParamDigest(NamedState(*model->encoder), NamedState(*model->decoder));
  run_peak.Merge(TensorBytesOn(device));
  WriteRunSummary(
      run, "single-process", JsonWriter(), summary,
      {{"trainer", PeakRssBytes(), device.is_cuda() ? run_peak.peak : 0, std::nullopt,
        run_peak.peak, device.is_cuda() ? std::optional<int64_t>(run_peak.reserved) : std::nullopt,
        std::nullopt, phases}},
      {{device.str(), run_peak.peak}}, t.memory_budget);
  return summary;
}

}  // namespace

}  // namespace up
