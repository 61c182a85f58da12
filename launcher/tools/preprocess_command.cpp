// See preprocess_command.h.
#include "launcher/tools/preprocess_command.h"

#include <cxxopts.hpp>
#include <filesystem>
#include <iostream>

#include "common/base/command_line.h"
#include "common/base/errors.h"
#include "common/base/logging.h"
#include "common/config/config_file.h"
#include "common/data/case_cache.h"

namespace up {

int PreprocessCommand(int argc, char** argv) {
  cxxopts::Options options("unet-pipeline preprocess",
                           "Crop, normalise and cache a raw 3-D dataset for data.kind: cache.");
  options.add_options()("input", "a BraTS folder of cases or an nnU-Net raw dataset folder",
                        cxxopts::value<std::string>())(
      "out", "the cache folder (created; kept up to date)", cxxopts::value<std::string>())(
      "config", "check the dataset against this config's model", cxxopts::value<std::string>())(
      "set", "override a config key (repeatable)", cxxopts::value<std::vector<std::string>>())(
      "h,help", "this help");
  const auto parsed = ParseCommandLine(options, argc, argv, "unet-pipeline preprocess --help");
  if (!parsed) return 0;
  const cxxopts::ParseResult& args = *parsed;
  if (!args.count("input") || !args.count("out"))
    throw UsageError("preprocess needs --input RAW and --out CACHE");
  InitLogging("preprocess", LogLevel::kInfo);
  const std::string input = args["input"].as<std::string>();
  const std::string cache = args["out"].as<std::string>();

  const RawDataset dataset = ListRawDataset(input);
  if (args.count("config")) {
    const Config config =
        LoadConfig(args["config"].as<std::string>(),
                   args.count("set") ? RejoinOverrides(args["set"].as<std::vector<std::string>>())
                                     : std::vector<std::string>{});
    const int channels = static_cast<int>(dataset.channel_names.size());
    const int classes = static_cast<int>(dataset.label_values.size());
    if (config.model.in_channels != channels || config.model.num_classes != classes) {
      throw UsageError("--input " + input + " has " + std::to_string(channels) + " channels and " +
                       std::to_string(classes) + " classes but the config's model has " +
                       std::to_string(config.model.in_channels) + " and " +
                       std::to_string(config.model.num_classes) +
                       "; set model.in_channels and model.num_classes to match");
    }
  }
  std::error_code ec;
  std::filesystem::create_directories(cache, ec);
  if (ec) throw UsageError("--out " + cache + ": cannot create it: " + ec.message());

  int written = 0, kept = 0, rebuilt = 0;
  const size_t n = dataset.cases.size();
  const bool live = StderrIsTerminal();
  for (size_t i = 0; i < n; ++i) {
    const RawCase& c = dataset.cases[i];
    if (live) ShowStatusLine(Str("preprocess: case ", i + 1, "/", n, " ", c.name));
    std::string why;
    switch (PreprocessCase(dataset, c, cache, &why)) {
      case CacheOutcome::kWritten:
        ++written;
        break;
      case CacheOutcome::kUpToDate:
        ++kept;
        break;
      case CacheOutcome::kRebuilt:
        ++rebuilt;
        EndStatusLine();
        LogWarn(Str("case ", c.name, " rebuilt: ", why));
        break;
    }
  }
  EndStatusLine();
  WriteCacheIndex(dataset, cache);
  std::cout << "preprocess: " << n << " " << dataset.layout << " cases into " << cache << " ("
            << written << " written, " << rebuilt << " rebuilt, " << kept << " up to date); "
            << dataset.channel_names.size() << " channels, " << dataset.label_values.size()
            << " classes\n";
  return 0;
}

}  // namespace up
