// Entry point of `unet-pipeline`; everything lives in the launcher library.
#include "common/model/tensor_accounting.h"
#include "launcher/cli.h"

int main(int argc, char** argv) {
  up::InstallTensorAccounting();  // before the first tensor: summary.json's peak_tensor_bytes
  return up::LauncherMain(argc, argv);
}
