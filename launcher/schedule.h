// The schedule: which stage runs which micro-batch, forward or backward, in
// which turn, for one optimizer step. A pure function of (kind, micro_batches,
// whether clipping needs both stages' norms), kept apart from the code that
// copies and computes, and tested on its own.
//
// A step is a list of phases run one after another; the turns inside a phase
// run at the same time (one per stage at most). Within a turn the stage runs
// its actions in order, and a FB or B waits on the ring for its input.
//
//   sequential (turn taking, stages may share a device):
//     [E: F0..F(M-1)] [D: FB0..FB(M-1) (+S)] [E: B0..B(M-1), S] ([D: S])
//   gpipe (overlapped; needs the lock off or two devices):
//     [E: F0..F(M-1), B0..B(M-1) (+S) | D: FB0..FB(M-1) (+S)] ([E: S | D: S])
//   1f1b (overlapped, at most 2 micro-batches in flight on the encoder):
//     [E: F0, F1, B0, F2, B1, .., B(M-1) (+S) | D: FB0..FB(M-1) (+S)] ([E: S | D: S])
//
// When clipping needs the global norm, both stages step after both
// backward passes are complete (the trailing S phases).
// Every schedule accumulates each stage's gradients in micro-batch order
// 0..M-1, so all of them give bit-identical results.
#pragma once

#include <string>
#include <vector>

#include "ipc/control_protocol.h"

namespace up {

enum class StageId { kEncoder = 0, kDecoder = 1 };
const char* StageName(StageId stage);

struct Turn {
  StageId stage;
  std::vector<ipc::Action> actions;
};
struct Phase {
  std::vector<Turn> turns;  // run concurrently
};

enum class ScheduleKind { kSequential, kGPipe, k1F1B };
ScheduleKind ParseScheduleKind(const std::string& name);  // UsageError if unknown

std::vector<Phase> StepSchedule(ScheduleKind kind, int micro_batches, bool global_norms);

// Checks the data dependencies of a schedule: F(m) before FB(m) before B(m),
// each exactly once per micro-batch, each stage steps once after its last
// backward, and (with global_norms) after the other stage's last backward.
// Returns "" when valid, else what is wrong.
std::string ValidateSchedule(const std::vector<Phase>& phases, int micro_batches,
                             bool global_norms);

// The validation pass after a step, over a plan of `batches` window
// batches (common/layout/window_grid.h), each crossing the boundary once:
//   taking turns:  [E: VF0..VF(k-1)] [D: VP0..VP(k-1)] [E: VFk..] [D: VPk..] ...
//   overlapped:    [E: VF0..VF(B-1) | D: VP0..VP(B-1)]
// with k = `per_turn` (the ring's slots: no more boundaries wait at once).
std::vector<Phase> ValidationSchedule(int64_t batches, int per_turn, bool overlapped);

// Most micro-batches the encoder holds activations for at once (forwarded,
// not yet backward) under `phases`.
int EncoderMaxInFlight(const std::vector<Phase>& phases);

// "E[F0 F1] D[FB0 FB1 S] E[B0 B1 S]": for logs and tests.
std::string DescribeSchedule(const std::vector<Phase>& phases);

}  // namespace up
