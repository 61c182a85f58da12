// `unet-pipeline batches`: writes the micro-batches training sees, for
// checking a Python reference against the trainers on the same data.
#pragma once

namespace up {

// --config FILE [--set k=v ...] [--steps N] --out FILE.pt: a dict of
// `images-s{S}-m{M}` (n, C, *S) float32 and `masks-s{S}-m{M}` (n, *S) int64
// for steps S < N (default train.steps) and micro-batches M, exactly as both
// trainers load them (LoadMicroBatch). Returns the exit code.
int BatchesCommand(int argc, char** argv);

}  // namespace up
