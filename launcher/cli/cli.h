// The `unet-pipeline` command: parses argv and runs a subcommand.
//   train [--single-process] --config C [--set k=v]... [--out DIR]
//   train --resume DIR [--set k=v]...
//   train ... [--record DIR [--record-steps N]] [--trace FILE]   (pipeline)
//   check --config C [--steps N] [--set k=v]...                  (check.h)
//   predict --checkpoint DIR --input PATH --out DIR               (predict.h)
//   export --checkpoint DIR --out FILE.pt                         (export_command.h)
//   make-sample-data DIR   (hidden; scripts/make-sample-data.sh)  (sample_data.h)
//   inspect PATH                                                 (inspect.h)
//   --version
// Returns the process exit code; every failure is one line on stderr.
#pragma once

namespace up {

// Installs the tensor accounting (common/device/tensor_accounting.h) first.
int LauncherMain(int argc, char** argv);

}  // namespace up
