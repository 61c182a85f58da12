// See time_balance.h.
#include "launcher/time_balance.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <sstream>

#include "common/base/child_process.h"
#include "common/base/errors.h"
#include "common/base/fs_util.h"
#include "common/base/json_writer.h"
#include "common/base/logging.h"
#include "common/config/config_file.h"
#include "common/layout/pipeline_layout.h"
#include "ipc/ring_format.h"
#include "launcher/stage_binary.h"

namespace up {
namespace {

namespace fs = std::filesystem;

std::string Ms(const std::vector<double>& ms, bool reversed) {
  std::string out;
  for (size_t k = 0; k < ms.size(); ++k) {
    const double v = ms[reversed ? ms.size() - 1 - k : k];
    out += Str(k ? ", " : "", JsonWriter::FormatDouble(std::round(v * 100) / 100));
  }
  return out;
}

}  // namespace

std::optional<LevelTimes> BalanceByTime(Config* config) {
  if (!NeedsLevelTimes(*config)) return std::nullopt;
  const PipelineLayout layout =
      ResolveLayout(*config);  // for the devices: they do not move with cuts
  RunScratchDir scratch(ipc::RunId::Random().Hex());
  const std::string config_path = (fs::path(scratch.path()) / "config.yaml").string();
  WriteFileAtomic(config_path, DumpConfig(*config));
  // Far above a level's time; a timing process that never ends is still stopped.
  const double limit_s = std::max(600.0, 10 * config->pipeline.timeout_s);
  LevelTimes times;
  for (bool encoder : {true, false}) {
    const std::string half = encoder ? "encoder" : "decoder";
    const StageSpec& spec = encoder ? layout.stages.front() : layout.stages.back();
    const std::string out = (fs::path(scratch.path()) / (half + ".json")).string();
    const std::string log = (fs::path(scratch.path()) / (half + ".out")).string();
    ChildProcess child = ChildProcess::Spawn(
        {half + " timing",
         StageBinary(half + "_proc"),
         {"--time-levels", out, "--config", config_path, "--part", std::to_string(spec.part + 1)},
         {},
         true,
         log});
    const ExitStatus status =
        child.Wait(std::chrono::steady_clock::now() +
                   std::chrono::milliseconds(static_cast<int64_t>(limit_s * 1e3)));
    if (!status.success()) {
      const std::string why = LastLineOf(log);
      const std::string line = "pipeline.balance = time: timing the " + half + "'s levels on " +
                               spec.device + " " + status.Describe() +
                               (why.empty() ? "" : " (" + why + ")") +
                               "; give pipeline.cuts or use pipeline.balance: memory";
      if (status.exited && status.code == 2) throw UsageError(line);
      throw RuntimeError(line);
    }
    ReadLevelTimes(out, &times);
  }
  ApplyTimeBalance(times, config);
  return times;
}

std::string DescribeTimeBalance(const LevelTimes& times, const Config& config) {
  const PipelineLayout layout = ResolveLayout(config);
  const std::vector<double> parts = PartTimes(times, layout);
  std::string text;
  for (const StageSpec& s : layout.stages) {
    text +=
        Str(text.empty() ? "" : ", ", s.Key(), " ", s.LevelsText(), " ",
            JsonWriter::FormatDouble(std::round(parts[static_cast<size_t>(s.index)] * 100) / 100),
            " ms");
  }
  return Str("pipeline.balance time: encoder levels 0-", times.encoder_ms.size() - 1, " take ",
             Ms(times.encoder_ms, false), " ms (", times.encoder_device, "), decoder levels ",
             times.decoder_ms.size() - 1, "-0 take ", Ms(times.decoder_ms, true), " ms (",
             times.decoder_device, "), a micro-batch forward and backward; parts: ", text);
}

std::string LevelTimesFile(const LevelTimes& times, const Config& config) {
  const PipelineLayout layout = ResolveLayout(config);
  return JsonWriter()
             .Raw("encoder_ms", JsonWriter::Array(times.encoder_ms))
             .Raw("decoder_ms", JsonWriter::Array(times.decoder_ms))
             .Field("encoder_device", times.encoder_device)
             .Field("decoder_device", times.decoder_device)
             .Raw("encoder_cuts", JsonWriter::Array(layout.encoder_cuts))
             .Raw("decoder_cuts", JsonWriter::Array(layout.decoder_cuts))
             .Raw("part_ms", JsonWriter::Array(PartTimes(times, layout)))
             .str() +
         "\n";
}

std::string EncodeCuts(const PipelineConfig& p) {
  auto ints = [](const std::vector<int>& v) {
    std::string out;
    for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + std::to_string(v[i]);
    return out;
  };
  return ints(p.encoder_cuts) + ";" + ints(p.decoder_cuts);
}

void DecodeCuts(const std::string& text, PipelineConfig* p) {
  const size_t semi = text.find(';');
  if (semi == std::string::npos) throw RuntimeError("cuts \"" + text + "\": no ';'");
  auto ints = [&](const std::string& s) {
    std::vector<int> out;
    std::istringstream in(s);
    std::string item;
    while (std::getline(in, item, ',')) {
      try {
        out.push_back(std::stoi(item));
      } catch (const std::exception&) {
        throw RuntimeError("cuts \"" + text + "\": \"" + item + "\" is not a level");
      }
    }
    return out;
  };
  p->encoder_cuts = ints(text.substr(0, semi));
  p->decoder_cuts = ints(text.substr(semi + 1));
}

}  // namespace up
