// See cli.h.
#include "launcher/cli/cli.h"

#include <torch/torch.h>

#include <algorithm>
#include <iostream>
#include <string>

#include "bench/bench_cli.h"
#include "common/base/errors.h"
#include "common/device/cuda_allocator_config.h"
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

// Every command, in the order --help lists them (README's command list is
// checked against this help by Readme.CommandsAreTheHelpsCommands).
struct Command {
  const char* name;
  const char* what;
  int (*run)(int argc, char** argv);
};

constexpr Command kCommands[] = {
    {"train", "train a U-Net (the pipeline, or --single-process)", TrainCommand},
    {"plan", "predict peak device memory of each way to train and whether it fits a card",
     PlanCommand},
    {"predict", "predict masks with a trained model: masks, overlays, NIfTI segmentations",
     PredictCommand},
    {"export", "write a trained model's weights as one PyTorch state dict or nnU-Net's folder",
     ExportCommand},
    {"preprocess", "crop, normalise and cache a raw 3-D dataset (BraTS, nnU-Net)",
     PreprocessCommand},
    {"make-sample-data", "write a small sample dataset (PNGs, BraTS NIfTI, nnU-Net raw)",
     MakeSampleDataCommand},
    {"check", "train the pipeline and single-process side by side, compare every tensor",
     CheckMain},
    {"inspect", "show what a recording, checkpoint or stage file holds", InspectMain},
    {"batches", "write the micro-batches training sees (.pt), for Python references",
     BatchesCommand},
    {"bench", "measure transports, step time and memory against their peers", BenchMain},
};

std::string Usage() {
  std::string text = "usage: unet-pipeline <command> [options]\ncommands:\n";
  for (const Command& c : kCommands) {
    std::string name = c.name;
    name.resize(std::max<size_t>(name.size() + 1, 18), ' ');
    text += "  " + name + c.what + "\n";
  }
  text += "  --version         versions and what this build supports\n";
  text += "run `unet-pipeline <command> --help` for a command's options";
  return text;
}

std::string CommandNames() {
  std::string names;
  for (const Command& c : kCommands) names += std::string(c.name) + ", ";
  return names + "--version";
}

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
  UseCudaAllocatorDefaults();  // before any CUDA allocation; the stages inherit it
  InstallTensorAccounting();   // before the first tensor: summary.json's peak_tensor_bytes
  try {
    if (argc < 2) {
      std::cerr << Usage() << std::endl;
      return 2;
    }
    const std::string command = argv[1];
    if (command == "--version" || command == "version") return Version();
    if (command == "-h" || command == "--help") {
      std::cout << Usage() << std::endl;
      return 0;
    }
    for (const Command& c : kCommands) {
      if (command == c.name) return c.run(argc - 1, argv + 1);
    }
    throw UsageError("unknown command '" + command + "'; commands: " + CommandNames());
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
