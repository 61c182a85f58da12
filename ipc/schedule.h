// The schedule: which stage runs which action (forward, backward, step,
// validation) in which turn, for one optimizer step of a pipeline of any
// number of stages. Stages 0..S-1 are in pipeline order (the encoder's
// parts, then the decoder's), each micro-batch's activations flowing
// 0 -> S-1 and its gradients back S-1 -> 0. The last stage runs FB (forward,
// loss, backward); every other stage runs F and, later, B. A skip tensor goes
// from an encoder part straight to the decoder part that uses it, and that
// part is always further down the chain, so "B_s(m) after B_{s+1}(m)" orders
// every gradient a stage waits for.
//
// A pure function of (kind, stages, micro-batches, whether clipping needs
// every stage's norms), kept apart from the processes that run it: the
// launcher sends each turn to its stage (launcher/turn_runner.h), and a stage
// running alone runs its own turns of the same schedule (stage/stage_alone.h).
// It lives in ipc/ because the turns are what the control protocol carries.
//
// A step is a list of phases run one after another; the turns inside a phase
// run at the same time (one per stage at most). Within a turn the stage runs
// its actions in order, and an action waits on its channel for its input.
//
//   sequential (turn taking, stages may share a device):
//     [0: F0..F(M-1)] [1: F0..] .. [S-1: FB0..FB(M-1) (+S)] [S-2: B0.. (+S)] .. [0: B0.. S]
//     ([1: S] .. [S-1: S])
//   gpipe (overlapped):
//     [0: F0..F(M-1) B0..B(M-1) (+S) | 1: .. | S-1: FB0..FB(M-1) (+S)] ([0: S | .. | S-1: S])
//   1f1b (overlapped): stage s warms up with min(S-1-s, M) forwards, then
//     alternates a forward and a backward, then drains its backwards: at most
//     S-s micro-batches in flight on stage s.
//
// With global norms stage 0, whose backward ends a step, steps in its last
// turn with every other stage's norms; the others step after it. Every
// schedule runs each stage's backwards in micro-batch order 0..M-1, so all
// accumulate gradients alike and give bit-identical results.
#pragma once

#include <string>
#include <vector>

#include "ipc/control_protocol.h"

namespace up {

enum class ScheduleKind { kSequential, kGPipe, k1F1B };
// pipeline.schedule's value: sequential | gpipe | 1f1b; UsageError otherwise.
ScheduleKind ParseScheduleKind(const std::string& name);

struct ChainTurn {
  int stage = 0;  // 0..S-1, in pipeline order
  std::vector<ipc::Action> actions;
};
struct ChainPhase {
  std::vector<ChainTurn> turns;  // run concurrently, one per stage at most
};

// std::invalid_argument for fewer than 2 stages or micro-batches < 1.
std::vector<ChainPhase> ChainSchedule(ScheduleKind kind, int stages, int micro_batches,
                                      bool global_norms);

// Checks a schedule by running it: phases in order; inside a phase the turns
// run at once and an action waits for its inputs (F_s(m) for F_{s-1}(m),
// FB or B_s(m) for B or FB_{s+1}(m) and its own F_s(m), a step for the
// stage's backwards and, with global norms, every stage's). "" when every
// action runs exactly once, on a stage it belongs to, without a deadlock,
// and each stage steps once, last; else what is wrong.
std::string ValidateChainSchedule(const std::vector<ChainPhase>& phases, int stages,
                                  int micro_batches, bool global_norms);

// The most micro-batches `stage` holds activations for at once (forwarded,
// backward not yet run): what its memory for activations scales with.
int ChainMaxInFlight(const std::vector<ChainPhase>& phases, int stage);

// "0[F0 F1] 1[FB0 FB1 S] 0[B0 B1 S]", concurrent turns joined by "|"; with
// `names` (one per stage) each stage by its name: "E[F0 F1] D[FB0 FB1 S] ...".
std::string DescribeChainSchedule(const std::vector<ChainPhase>& phases,
                                  const std::vector<std::string>& names = {});

// Stage `stage`'s turns, in the order the schedule runs them.
std::vector<std::vector<ipc::Action>> StageTurns(const std::vector<ChainPhase>& phases, int stage);

// The validation pass after a step through S stages, over a plan of
// `batches` window batches (each crossing every channel once): taking turns,
// [0: VF0..VF(k-1)] [1: VF0..VF(k-1)] .. [S-1: VP0..VP(k-1)] [0: VFk..] ..
// with k = `per_turn` (the rings' slots); overlapped, one phase in which every
// stage runs all its batches.
std::vector<ChainPhase> ChainValidationSchedule(int64_t batches, int per_turn, bool overlapped,
                                                int stages);

}  // namespace up
