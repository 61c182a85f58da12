// Entry point of `unet-pipeline`; everything lives in the launcher library.
#include "launcher/cli.h"

int main(int argc, char** argv) { return up::LauncherMain(argc, argv); }
