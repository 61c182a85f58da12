// See batches_command.h.
#include "launcher/tools/batches_command.h"

#include <cxxopts.hpp>
#include <iostream>

#include "common/base/command_line.h"
#include "common/base/errors.h"
#include "common/config/config_file.h"
#include "common/data/dataset.h"
#include "common/model/tensor_file.h"
#include "common/nnunet/nnunet_import.h"

namespace up {

int BatchesCommand(int argc, char** argv) {
  cxxopts::Options options("unet-pipeline batches",
                           "Write the micro-batches training sees as one .pt dict of tensors.");
  options.add_options()("config", "YAML config file", cxxopts::value<std::string>())(
      "set", "override a key (repeatable)", cxxopts::value<std::vector<std::string>>())(
      "steps", "how many optimizer steps (default train.steps)", cxxopts::value<int>())(
      "out", "the .pt file to write", cxxopts::value<std::string>())("h,help", "this help");
  const auto parsed = ParseCommandLine(options, argc, argv, "unet-pipeline batches --help");
  if (!parsed) return 0;
  const cxxopts::ParseResult& args = *parsed;
  if (!args.count("config") || !args.count("out"))
    throw UsageError("batches needs --config FILE and --out FILE.pt");
  const Config config =
      LoadConfig(args["config"].as<std::string>(),
                 args.count("set") ? RejoinOverrides(args["set"].as<std::vector<std::string>>())
                                   : std::vector<std::string>{});
  const int steps = args.count("steps") ? args["steps"].as<int>() : config.train.steps;
  if (steps < 1 || steps > config.train.steps)
    throw UsageError("--steps " + std::to_string(steps) +
                     ": must be in [1, train.steps = " + std::to_string(config.train.steps) + "]");
  if (config.data.kind == DataKind::kNnunet) ImportNnunetData(config);
  const std::unique_ptr<Dataset> data = MakeDataset(config);
  NamedTensors out;
  for (int s = 0; s < steps; ++s) {
    for (int m = 0; m < BatchMicroBatches(config); ++m) {
      MicroBatch b = LoadMicroBatch(*data, config, s, m);
      const std::string at = "-s" + std::to_string(s) + "-m" + std::to_string(m);
      out.emplace_back("images" + at, b.images);  // (n, C, *S)
      out.emplace_back("masks" + at, b.masks);    // (n, *S)
    }
  }
  const std::string path = args["out"].as<std::string>();
  SaveTensorFile(path, out);
  std::cout << "wrote " << path << ": " << steps << " steps x " << BatchMicroBatches(config)
            << " micro-batches of " << MicroBatchSamples(config) << " samples\n";
  return 0;
}

}  // namespace up
