// Where a pipeline step's time goes, read from a run's Chrome trace
// (`train --trace FILE`; common/base/trace.h writes one event per line). For the
// steps after `warmup`, per step on average:
//   turn_ms      the launcher's "turn held" spans: from sending a stage its
//                Turn to its TurnDone (with the lock on, turns do not overlap)
//   compute_ms   both stages' "compute" spans (forward, backward, optimizer),
//                less the transfers that happen inside them
//   transfer_ms  both stages' "transfer" spans (boundary send and receive)
// so turn_ms - compute_ms - transfer_ms is what turn-taking itself costs
// (control messages, a stage waking up, its report), and a step's wall time
// minus turn_ms is the launcher's own work between turns.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace up::bench {

struct StepBreakdown {
  int64_t steps = 0;  // steps measured
  double turn_ms = 0;
  double compute_ms = 0;
  double transfer_ms = 0;
};

// RuntimeError if the file cannot be read or holds no turn of a step after
// `warmup` (steps count from 1 in the trace).
StepBreakdown BreakdownFromTrace(const std::string& trace_path, int64_t warmup);

// Each stage's own work in the same window, for the bubble of a schedule:
// per step, the stage process's "compute" spans less the transfers inside
// them (what it waits for on a ring is not work), next to the step's wall
// time (the window over the steps). A stage's bubble is 1 - compute / wall.
struct StageCompute {
  std::string stage;  // its key, from the trace's process name "<key>_proc"
  double compute_ms = 0;
};
struct StagesBreakdown {
  int64_t steps = 0;
  double wall_ms = 0;
  std::vector<StageCompute> stages;  // in the order their processes appear
};
StagesBreakdown StagesFromTrace(const std::string& trace_path, int64_t warmup);

// Per stage process, the time its spans named `name` took per step in the
// same window (0 for a process without any).
std::vector<StageCompute> SpanTimeFromTrace(const std::string& trace_path, int64_t warmup,
                                            const std::string& name);

}  // namespace up::bench
