// `unet-pipeline bench <transport|step|memory> [options]`: parses the bench
// commands' arguments, runs one bench and prints a table, or one JSON object
// with --json. Bad arguments throw UsageError (exit code 2, one line);
// LauncherMain catches and prints. argv[0] is "bench".
#pragma once

namespace up {

int BenchMain(int argc, char** argv);

}  // namespace up
