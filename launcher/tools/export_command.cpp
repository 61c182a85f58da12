// See export_command.h.
#include "launcher/tools/export_command.h"

#include <cxxopts.hpp>
#include <filesystem>
#include <iostream>
#include <map>

#include "common/base/command_line.h"
#include "common/base/errors.h"
#include "common/base/fs_util.h"
#include "common/model/state_dict.h"
#include "common/model/tensor_file.h"
#include "common/nnunet/nnunet_export.h"
#include "common/training/trained_model.h"

namespace up {
namespace {

namespace fs = std::filesystem;

std::string FeaturesText(const std::vector<int>& features) {
  std::string out = "[";
  for (size_t i = 0; i < features.size(); ++i) out += (i ? ", " : "") + std::to_string(features[i]);
  return out + "]";
}

}  // namespace

int ExportCommand(int argc, char** argv) {
  cxxopts::Options options("unet-pipeline export",
                           "Write a trained U-Net's weights as one PyTorch state dict (.pt), or "
                           "an nnU-Net run as nnU-Net's own trained-model folder.");
  options.add_options()("checkpoint", "a run folder or RUN/checkpoints/step-N",
                        cxxopts::value<std::string>())(
      "out", "the .pt file to write (--format nnunet: the folder)", cxxopts::value<std::string>())(
      "format", "state_dict (default) | nnunet", cxxopts::value<std::string>())(
      "dataset-json",
      "nnunet: the dataset.json of the data trained on (default: one written "
      "from the model's channels and classes)",
      cxxopts::value<std::string>())("plans",
                                     "nnunet: the plans file (default: the one the run kept)",
                                     cxxopts::value<std::string>())(
      "initial",
      "the weights the run started from (train.seed, before step 1), not a checkpoint's")(
      "configuration",
      "nnunet: its configuration (default: the "
      "run's)",
      cxxopts::value<std::string>())("h,help", "this help");
  const auto parsed = ParseCommandLine(options, argc, argv, "unet-pipeline export --help");
  if (!parsed) return 0;
  const cxxopts::ParseResult& args = *parsed;
  if (!args.count("checkpoint") || !args.count("out"))
    throw UsageError("export needs --checkpoint DIR and --out FILE.pt");
  const std::string out = args["out"].as<std::string>();
  const std::string format = args.count("format") ? args["format"].as<std::string>() : "state_dict";
  if (format != "state_dict" && format != "nnunet")
    throw UsageError("--format " + format + ": use state_dict or nnunet");
  const fs::path parent = fs::absolute(out).parent_path();
  std::error_code ec;
  if (!fs::is_directory(parent, ec)) {
    throw UsageError("--out " + out + ": the folder '" + parent.string() +
                     "' does not exist; create it first");
  }

  TrainedModel model = args.count("initial")
                           ? InitialModel(args["checkpoint"].as<std::string>())
                           : LoadTrainedModel(args["checkpoint"].as<std::string>());
  if (format == "nnunet") {
    NnunetExportOptions o;
    o.out = out;
    if (args.count("plans")) o.plans = args["plans"].as<std::string>();
    if (args.count("configuration")) o.configuration = args["configuration"].as<std::string>();
    if (args.count("dataset-json")) o.dataset_json = args["dataset-json"].as<std::string>();
    ExportNnunetFolder(model, o);
    return 0;
  }
  const NamedTensors state = MergedStateDict(model.config.model, *model.encoder, *model.decoder);
  SaveTensorFile(out, state);
  const ModelConfig& m = model.config.model;
  std::cout << "wrote " << out << ": " << state.size() << " tensors from " << model.checkpoint_dir
            << " (step " << model.step << ")\n";
  if (m.kind == ModelKind::kNnunet) {
    // The architecture beside it, for the reference class to be built from.
    const std::string arch = fs::path(out).replace_extension(".architecture.json").string();
    WriteFileAtomic(arch, "{\"architecture\": " + NnunetArchitectureText(m.nnunet) +
                              ", \"in_channels\": " + std::to_string(m.in_channels) +
                              ", \"num_classes\": " + std::to_string(m.num_classes) + "}\n");
    std::cout << "wrote " << arch << ": the nnU-Net architecture\n"
              << "load it in Python with dynamic_network_architectures (docs/EXPORT.md):\n"
              << "  from nnunet_reference import network_from_architecture\n"
              << "  spec = json.load(open(\"" << arch << "\"))\n"
              << "  net = network_from_architecture(spec[\"architecture\"], "
                 "spec[\"in_channels\"], spec[\"num_classes\"])\n"
              << "  net.load_state_dict(torch.load(\"" << out << "\", weights_only=True))\n";
    return 0;
  }
  if (m.kind == ModelKind::kTorchscript) {
    std::cout << "keys are your model's own (" << m.bundle.source << ", bundle " << m.path
              << "):\n  model.load_state_dict(torch.load(\"" << out
              << "\", weights_only=True), strict=True)\n";
    return 0;
  }
  std::cout << "load it in Python (docs/EXPORT.md):\n"
            << "  from unet_reference import UNet\n"
            << "  model = UNet(dims=" << m.dims << ", in_channels=" << m.in_channels
            << ", num_classes=" << m.num_classes << ", features=" << FeaturesText(m.features)
            << ", norm=\"" << NameOf(m.norm) << "\""
            << (m.norm == Norm::kGroup ? ", groups=" + std::to_string(m.groups) : std::string())
            << ")\n"
            << "  model.load_state_dict(torch.load(\"" << out << "\", weights_only=True))\n";
  return 0;
}

}  // namespace up
