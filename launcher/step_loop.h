// The step loop of a pipeline run: from the first step to train.steps (or
// until a stop signal), each step's phases through the turn runner, its
// figures in metrics.jsonl and the progress line, a validation pass through
// replica 0's stages every validate.every steps, and a checkpoint of every
// stage together (replica 0's stage files, committed as one) at
// checkpoint.every, the last step, a stop, and a new best validation.
//
// It talks to the stages through a StageGroup and a TurnRunner only, so a
// test can drive it with threads playing the stages. Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "common/config/config.h"
#include "common/data/validation_split.h"
#include "common/run/run_dir.h"
#include "launcher/pipeline_checks.h"
#include "launcher/progress.h"
#include "launcher/run_summary.h"
#include "launcher/stage_link.h"
#include "launcher/step_figures.h"
#include "launcher/turn_runner.h"

namespace up {

class StepLoop {
 public:
  // Everything given must outlive it; `stages` are handshaken.
  StepLoop(const Config& config, const PipelinePlan& plan, RunDir& run, StageGroup& stages,
           TurnRunner& turns);

  // Runs steps `start` (0-based) to train.steps, or to the step a stop
  // signal ends. `resumed`: the best validation so far stays the best.
  // Returns the run's training figures (the digest and throughput are the
  // caller's); completed() says how far it got.
  TrainSummary Run(int64_t start, bool resumed);
  int64_t completed() const { return completed_; }  // steps done, counted from 1

 private:
  // The step's turns (training, every replica); held_s is the step's own.
  StepTally Train(int64_t step, std::vector<double>* held_s);
  // The validation pass after `step`; `best`: its score is the best yet.
  ValidationRecord Validate(int64_t step, TrainSummary* summary, bool* best);
  // Every stage of replica 0 saves its file of `step` into one staging
  // folder (a stage on another node sends it over), committed together.
  void Checkpoint(int64_t step);

  const Config& config_;
  const PipelinePlan& plan_;
  RunDir& run_;
  StageGroup& stages_;
  TurnRunner& turns_;
  const std::unique_ptr<ValidationSet> validation_;  // null without data.validation
  Progress progress_;
  SkipWatch skips_;
  int64_t completed_ = 0;
};

}  // namespace up
