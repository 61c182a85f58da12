// See step_loop.h.
#include "launcher/step_loop.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "common/base/deadline.h"
#include "common/base/errors.h"
#include "common/base/fs_util.h"
#include "common/base/logging.h"
#include "common/base/test_hooks.h"
#include "common/run/val_metrics.h"
#include "common/training/checkpoint.h"

namespace up {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

StepLoop::StepLoop(const Config& config, const PipelinePlan& plan, RunDir& run, StageGroup& stages,
                   TurnRunner& turns)
    : config_(config),
      plan_(plan),
      run_(run),
      stages_(stages),
      turns_(turns),
      validation_(MakeValidationSet(config)),
      progress_("pipeline", config.train.steps) {}

TrainSummary StepLoop::Run(int64_t start, bool resumed) {
  const TrainConfig& t = config_.train;
  TrainSummary summary;
  if (resumed) summary.best = RecallBestValidation(run_.path());  // best stays best
  const auto wall_start = Clock::now();
  completed_ = start;
  for (int64_t step = start; step < t.steps; ++step) {
    const auto step_start = Clock::now();
    std::vector<double> step_held_s;  // before any validation
    const StepTally tally = Train(step, &step_held_s);
    const double step_s = SecondsSince(step_start);
    std::optional<Fp16Record> fp16;
    if (t.precision == Precision::kFp16) fp16 = Fp16Verdict(tally, stages_.all(), step, skips_);
    const StepEnd end = DecideStepEnd(config_, step);
    std::optional<ValidationRecord> val;
    bool best = false;
    if (end.validate) val = Validate(step, &summary, &best);
    const double dice = tally.dice.Mean();
    AppendStepMetrics(run_, t, step, tally.loss, dice, step_s, tally.data_wait_s, fp16,
                      val ? &*val : nullptr);
    progress_.Step(
        step + 1, tally.loss, dice, t.batch_size / step_s,
        StageFiguresText(stages_.all(), step_held_s, step_s, plan_.lock_on, plan_.any_cuda));
    summary.final_loss = tally.loss;

    if (end.checkpoint || best) Checkpoint(step);  // replica 0 writes the run's one copy
    if (best) KeepBestCheckpoint(run_.path(), step + 1);
    completed_ = step + 1;
    if (end.stopping) {
      WarnStopped(completed_, run_);
      break;
    }
  }
  summary.wall_s = SecondsSince(wall_start);
  return summary;
}

StepTally StepLoop::Train(int64_t step, std::vector<double>* held_s) {
  StepTally tally(config_.model, plan_.processes());
  turns_.BeginStep();
  // The loss and Dice over every replica.
  turns_.Run(step, plan_.phases, plan_.replicas,
             [&](int id, const ipc::TurnReport& report) { tally.Add(id, report); });
  *held_s = turns_.held_s();
  return tally;
}

// Through replica 0's stages, the training state untouched.
ValidationRecord StepLoop::Validate(int64_t step, TrainSummary* summary, bool* best) {
  const auto val_start = Clock::now();
  std::vector<std::vector<int64_t>> cases;
  turns_.Run(step,
             ChainValidationSchedule(static_cast<int64_t>(validation_->plan.size()),
                                     config_.train.micro_batches, !plan_.lock_on, plan_.stages),
             1, [&](int, const ipc::TurnReport& report) {
               if (report.val_cases == 0) return;
               const size_t per_case = report.val_counts.size() / report.val_cases;
               for (size_t c = 0; c < static_cast<size_t>(report.val_cases); ++c)
                 cases.emplace_back(report.val_counts.begin() + c * per_case,
                                    report.val_counts.begin() + (c + 1) * per_case);
             });
  if (static_cast<int64_t>(cases.size()) != validation_->cases->size()) {
    throw RuntimeError(Str("validation after step ", step + 1, ": the ",
                           stages_[plan_.stages - 1].label, " scored ", cases.size(), " of ",
                           validation_->cases->size(), " cases"));
  }
  ValidationRecord val =
      FinishValidation(cases, validation_->entries, step, SecondsSince(val_start), summary, best);
  progress_.Validated(val.scores.mean);
  return val;
}

void StepLoop::Checkpoint(int64_t step) {
  const std::string doing = "checkpoint of step " + std::to_string(step + 1);
  const std::string staging = BeginCheckpoint(run_.path(), step + 1);
  StagingCleanup unless_committed(staging);
  for (StageLink& s : stages_.all()) {
    if (s.replica != 0) continue;
    stages_.Send(
        s, ipc::Encode(ipc::SaveRequest{step + 1, (fs::path(staging) / (s.key + ".pt")).string()}),
        doing);
  }
  std::vector<int> waiting;
  for (int s = 0; s < plan_.stages; ++s) waiting.push_back(s);
  std::vector<std::string> received(static_cast<size_t>(plan_.stages));  // from other nodes
  while (!waiting.empty()) {
    auto [id, m] = stages_.Await(waiting, After(config_.pipeline.timeout_s), doing);
    if (m.type == static_cast<uint32_t>(ipc::MsgType::kFileChunk) && stages_[id].remote()) {
      const ipc::FileChunk chunk = ipc::DecodeFileChunk(m);
      std::string& bytes = received[static_cast<size_t>(id)];
      bytes += chunk.bytes;
      if (chunk.last) {
        WriteFileAtomic((fs::path(staging) / (stages_[id].key + ".pt")).string(), bytes);
        bytes.clear();
      }
      continue;
    }
    ipc::ExpectType(m, ipc::MsgType::kSaved, stages_[id].label);
    waiting.erase(std::find(waiting.begin(), waiting.end(), id));
  }
  TestHookPoint("launcher", "save", step + 1);
  CommitCheckpoint(run_.path(), staging, step + 1, plan_.stage_files, config_);
}

}  // namespace up
