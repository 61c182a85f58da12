// The `unet-pipeline` command: parses argv and runs a subcommand.
//   train [--single-process] --config C [--set k=v]... [--out DIR]
//   train --resume DIR [--set k=v]...
//   train ... [--record DIR [--record-steps N]] [--trace FILE]   (pipeline)
//   check --config C [--steps N] [--set k=v]...                  (check.h)
//   inspect PATH                                                 (inspect.h)
//   --version
// Returns the process exit code; every failure is one line on stderr.
#pragma once

namespace up {

int LauncherMain(int argc, char** argv);

}  // namespace up
