// A stage run alone, without the launcher, the other stage or a device lock,
// on the CPU: for debugging one half of a split run.
//
//   <stage>_proc --replay DIR [--part N] [--atol A] [--rtol R] [-q]
//     Loads the stage's (with parts: part N's) weights and optimizer state
//     recorded at the first recorded step of DIR (`train --record DIR`), then
//     runs every recorded step with the sequential schedule against fakes of
//     its neighbours: what it would receive on each of its channels comes
//     from the recording (the forward tensors sent into it, the gradients
//     sent back to it), and what it sends is compared with what was recorded.
//     Compared, per tensor: everything it sends on each channel, the loss of
//     each micro-batch (the last stage), and every parameter and buffer after
//     each step with the weights recorded at the next step's start. The
//     recorded peer norms feed clipping. Prints the largest absolute and
//     relative difference per tensor; exit 1 when any is beyond tolerance
//     (default 0: bit-identical, as on the same CPU build), 2 on bad input.
//
//   <stage>_proc --standalone --config FILE [--part N] [--set k=v]... [--steps N]
//     Feeds random tensors shaped like the boundary (the other stage's
//     messages) and prints the time of each step: a profile of one stage.
//
//   <stage>_proc --time-levels FILE --config FILE [--part N] [--set k=v]...
//     Times every level of the stage's half on part N's device, one
//     micro-batch forward and backward (common/model/level_timing.h), and
//     writes them to FILE as one JSON line (common/layout/level_times.h): what the
//     launcher cuts by under pipeline.balance: time.
#pragma once

#include <string>

#include "stage/stage_worker.h"

namespace up::stage {

// True when argv asks for --replay, --standalone or --time-levels.
bool WantsStageAlone(int argc, char** argv);

// Runs the mode argv asks for; returns the exit code (errors are one line).
int StageAloneMain(int argc, char** argv, const std::string& stage, const WorkerFactory& factory);

}  // namespace up::stage
