// `unet-pipeline train`: the pipeline, or the single-process reference with
// --single-process, on this machine or as one node of several.
//   train [--single-process] --config C [--set k=v]... [--out DIR]
//   train --resume DIR [--set k=v]...
//   train ... [--record DIR [--record-steps N]] [--trace FILE]   (pipeline)
//   train ... --nnodes N --node-rank R --master-addr A            (torchrun-style)
// Everything a run reads (config, devices, data) is checked before its run
// folder exists; a failure afterwards says which checkpoint is intact.
// Returns the exit code; errors are thrown for LauncherMain's one line.
#pragma once

namespace up {

int TrainCommand(int argc, char** argv);

}  // namespace up
