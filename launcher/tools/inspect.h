// `unet-pipeline inspect PATH`: what a recording or a checkpoint holds.
//
// PATH may be a recording folder (index.json: its steps and entries, every
// tensor file's tensors), a checkpoint folder (manifest.json: its step and
// both stage files), a stage file (`encoder.pt`, `*.stage`: a LibTorch
// archive of weights, optimizer state, step and RNG) or a recording's tensor
// file (a pickled dict). Each tensor: name, shape, dtype, min, max, mean, std.
#pragma once

namespace up {

int InspectMain(int argc, char** argv);

}  // namespace up
