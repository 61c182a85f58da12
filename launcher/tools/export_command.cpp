// See export_command.h.
#include "launcher/tools/export_command.h"

#include <cxxopts.hpp>
#include <filesystem>
#include <iostream>

#include "common/command_line.h"
#include "common/errors.h"
#include "common/model/tensor_file.h"
#include "launcher/tools/trained_model.h"

namespace up {
namespace {

namespace fs = std::filesystem;

std::string FeaturesText(const std::vector<int>& features) {
  std::string out = "[";
  for (size_t i = 0; i < features.size(); ++i) out += (i ? ", " : "") + std::to_string(features[i]);
  return out + "]";
}

}  // namespace

NamedTensors MergedStateDict(TrainedModel& model) {
  NamedTensors out;
  for (const auto& [name, t] : NamedState(*model.encoder))
    out.emplace_back("encoder." + name, t.detach().cpu().contiguous());
  for (const auto& [name, t] : NamedState(*model.decoder))
    out.emplace_back("decoder." + name, t.detach().cpu().contiguous());
  return out;
}

int ExportCommand(int argc, char** argv) {
  cxxopts::Options options("unet-pipeline export",
                           "Write a trained U-Net's weights as one PyTorch state dict (.pt).");
  options.add_options()("checkpoint", "a run folder or RUN/checkpoints/step-N",
                        cxxopts::value<std::string>())(
      "out", "the .pt file to write", cxxopts::value<std::string>())("h,help", "this help");
  const auto parsed = ParseCommandLine(options, argc, argv, "unet-pipeline export --help");
  if (!parsed) return 0;
  const cxxopts::ParseResult& args = *parsed;
  if (!args.count("checkpoint") || !args.count("out"))
    throw UsageError("export needs --checkpoint DIR and --out FILE.pt");
  const std::string out = args["out"].as<std::string>();
  const fs::path parent = fs::absolute(out).parent_path();
  std::error_code ec;
  if (!fs::is_directory(parent, ec)) {
    throw UsageError("--out " + out + ": the folder '" + parent.string() +
                     "' does not exist; create it first");
  }

  TrainedModel model = LoadTrainedModel(args["checkpoint"].as<std::string>());
  const NamedTensors state = MergedStateDict(model);
  SaveTensorFile(out, state);
  const ModelConfig& m = model.config.model;
  std::cout << "wrote " << out << ": " << state.size() << " tensors from " << model.checkpoint_dir
            << " (step " << model.step << ")\n"
            << "load it in Python (docs/EXPORT.md):\n"
            << "  from unet_reference import UNet\n"
            << "  model = UNet(dims=" << m.dims << ", in_channels=" << m.in_channels
            << ", num_classes=" << m.num_classes << ", features=" << FeaturesText(m.features)
            << ", norm=\"" << m.norm << "\""
            << (m.norm == "group" ? ", groups=" + std::to_string(m.groups) : std::string()) << ")\n"
            << "  model.load_state_dict(torch.load(\"" << out << "\", weights_only=True))\n";
  return 0;
}

}  // namespace up
