// The decoder_proc process's entry point, torch-free so that main.cpp compiles
// in a moment (LibTorch's headers cost ~25 s a file).
#pragma once

namespace up {

// StageMain (stage/stage_worker.h) with the DecoderStage factory: parses argv,
// joins the run and serves until the launcher says stop. The exit code.
int DecoderProcMain(int argc, char** argv);

}  // namespace up
