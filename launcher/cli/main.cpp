// Entry point of `unet-pipeline`; everything lives in the launcher library
// (torch-free here, so this file compiles in a moment).
#include "launcher/cli/cli.h"

int main(int argc, char** argv) { return up::LauncherMain(argc, argv); }
