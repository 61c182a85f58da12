// The figures one pipeline step reports: what its turns' reports add up to
// (the loss and Dice over every replica, the fp16 outcome of each process's
// optimizer step, the time spent waiting for data), the fp16 verdict (every
// stage must have used the same loss scale and skipped alike), and the
// stages' part of the progress line. Pure but for SkipWatch's warning.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/config/config.h"
#include "common/model/loss.h"
#include "ipc/control_protocol.h"
#include "launcher/run_summary.h"
#include "launcher/stage_link.h"

namespace up {

// A training step's reports, added up as they arrive.
struct StepTally {
  StepTally(const ModelConfig& model, int processes)
      : dice(model), stepped(static_cast<size_t>(processes)) {}
  // Each micro-batch's loss is already scaled by 1 / (micro_batches x replicas).
  void Add(int process, const ipc::TurnReport& report);

  double loss = 0;
  DiceCounter dice;
  std::vector<std::optional<ipc::TurnReport>> stepped;  // fp16: each process's step's report
  double data_wait_s = 0;
};

// fp16: the step's record when every process (in `stages`' order) stepped
// with the same loss scale and skipped alike, noted in `skips`; else a
// RuntimeError listing each stage's outcome.
Fp16Record Fp16Verdict(const StepTally& tally, const std::vector<StageLink>& stages, int64_t step,
                       SkipWatch& skips);

// The stages' figures after a step of `step_s` seconds: the share of it each
// held its device turns (`held_s` by process; "busy" without the lock), its
// RSS, its device peak (`any_cuda`) and its live and peak tensor bytes.
std::string StageFiguresText(const std::vector<StageLink>& stages,
                             const std::vector<double>& held_s, double step_s, bool lock_on,
                             bool any_cuda);

}  // namespace up
