// See cli.h.
#include "launcher/cli/cli.h"

#include <torch/torch.h>

#include <iostream>

#include "bench/bench_cli.h"
#include "common/base/errors.h"
#include "common/device/device_memory.h"
#include "common/device/tensor_accounting.h"
#include "launcher/cli/train_command.h"
#include "launcher/tools/batches_command.h"
#include "launcher/tools/check.h"
#include "launcher/tools/export_command.h"
#include "launcher/tools/inspect.h"
#include "launcher/tools/plan_command.h"
#include "launcher/tools/predict.h"
#include "launcher/tools/preprocess_command.h"
#include "launcher/tools/sample_data.h"

namespace up {
namespace {

constexpr const char* kUsage =
    "usage: unet-pipeline <command> [options]\n"
    "commands:\n"
    "  train     train a U-Net (the pipeline, or --single-process)\n"
    "  plan      predict peak device memory and whether it fits a card\n"
    "  check     train the pipeline and single-process side by side, compare every tensor\n"
    "  inspect   show what a recording, checkpoint or stage file holds\n"
    "  bench     measure transports, step time and memory against their peers\n"
    "  predict   predict masks with a trained model: mask PNGs and colour overlays\n"
    "  export    write a trained model's weights as one PyTorch state dict (.pt)\n"
    "  batches   write the micro-batches training sees (.pt), for Python references\n"
    "  preprocess crop, normalise and cache a raw 3-D dataset (BraTS, nnU-Net) for data.kind: "
    "cache\n"
    "  --version versions and what this build supports\n"
    "run `unet-pipeline <command> --help` for a command's options";

int Version() {
  std::cout << "unet-pipeline 0.1.0\n"
            << "LibTorch " << TORCH_VERSION << "\n"
            << "CUDA support built: " << (CudaBuilt() ? "yes" : "no") << "\n"
            << "CUDA devices visible: " << CudaDeviceCount() << "\n"
            << "transports: shm, gloo" << (CudaBuilt() ? ", cuda_ipc and nccl (need GPUs)" : "")
            << "\n";
  return 0;
}

}  // namespace

int LauncherMain(int argc, char** argv) {
  InstallTensorAccounting();  // before the first tensor: summary.json's peak_tensor_bytes
  try {
    if (argc < 2) {
      std::cerr << kUsage << std::endl;
      return 2;
    }
    const std::string command = argv[1];
    if (command == "--version" || command == "version") return Version();
    if (command == "-h" || command == "--help") {
      std::cout << kUsage << std::endl;
      return 0;
    }
    if (command == "train") return TrainCommand(argc - 1, argv + 1);
    if (command == "plan") return PlanCommand(argc - 1, argv + 1);
    if (command == "check") return CheckMain(argc - 1, argv + 1);
    if (command == "inspect") return InspectMain(argc - 1, argv + 1);
    if (command == "bench") return BenchMain(argc - 1, argv + 1);
    if (command == "predict") return PredictCommand(argc - 1, argv + 1);
    if (command == "export") return ExportCommand(argc - 1, argv + 1);
    if (command == "batches") return BatchesCommand(argc - 1, argv + 1);
    if (command == "preprocess") return PreprocessCommand(argc - 1, argv + 1);
    if (command == "make-sample-data") return MakeSampleDataCommand(argc - 1, argv + 1);
    throw UsageError(
        "unknown command '" + command +
        "'; commands: train, plan, check, inspect, bench, predict, export, batches, preprocess, "
        "--version");
  } catch (const Error& e) {
    std::cerr << "unet-pipeline: error: " << e.what() << std::endl;
    return e.exit_code();
  } catch (const c10::Error& e) {
    std::cerr << "unet-pipeline: error: " << e.what_without_backtrace() << std::endl;
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "unet-pipeline: error: " << e.what() << std::endl;
    return 1;
  }
}

}  // namespace up
