// `unet-pipeline check`: trains the pipeline and the single-process reference
// side by side and compares them tensor by tensor at every step.
//
//   unet-pipeline check --config C [--steps N] [--set k=v]... [--atol A]
//                       [--rtol R] [--keep DIR] [-v]
//
// The pipeline runs as a child `unet-pipeline train --record` of N steps; the
// reference trains in this process with the single-process semantics
// (single_process.h), tapping the boundary so that it sees what would cross
// it. Compared at each step: both stages' parameters and buffers at the
// step's start (and after the last step), each micro-batch's boundary
// tensors, its loss, and the boundary's gradients (the decoder's share, what
// the pipeline sends back). Exit 0 when every tensor is within tolerance
// (default: bit-identical), 1 naming the first tensor that is not.
#pragma once

namespace up {

int CheckMain(int argc, char** argv);

}  // namespace up
