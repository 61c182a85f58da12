// See level_times.h.
#include "common/layout/level_times.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>

#include "common/base/errors.h"
#include "common/base/fs_util.h"
#include "common/base/json_writer.h"
#include "common/layout/level_partition.h"

namespace up {
namespace {

// Microseconds, the unit BalancedCuts weighs (at least 1: a level never costs nothing).
std::vector<int64_t> Micros(const std::vector<double>& ms) {
  std::vector<int64_t> out;
  for (double v : ms) out.push_back(std::max<int64_t>(1, std::llround(v * 1e3)));
  return out;
}

}  // namespace

std::string LevelTimesJson(const std::string& half, const std::vector<double>& ms,
                           const std::string& device) {
  return JsonWriter()
             .Field("half", half)
             .Field("device", device)
             .Raw("ms", JsonWriter::Array(ms))
             .str() +
         "\n";
}

void ReadLevelTimes(const std::string& path, LevelTimes* into) {
  const std::string text = ReadFile(path);
  try {
    const YAML::Node root = YAML::Load(text);
    const std::string half = root["half"].as<std::string>();
    std::vector<double> ms = root["ms"].as<std::vector<double>>();
    for (double v : ms)
      if (!std::isfinite(v) || v < 0) throw RuntimeError("a time is not a number >= 0");
    const std::string device = root["device"].as<std::string>();
    if (half == "encoder") {
      into->encoder_ms = std::move(ms);
      into->encoder_device = device;
    } else if (half == "decoder") {
      into->decoder_ms = std::move(ms);
      into->decoder_device = device;
    } else {
      throw RuntimeError("half \"" + half + "\" is neither encoder nor decoder");
    }
  } catch (const YAML::Exception& e) {
    throw RuntimeError(path + ": not a level-times file (" + e.msg + ")");
  } catch (const RuntimeError& e) {
    throw RuntimeError(path + ": " + e.what());
  }
}

bool NeedsLevelTimes(const Config& c) {
  const PipelineConfig& p = c.pipeline;
  if (p.balance != Balance::kTime) return false;
  return (p.encoder_parts > 1 && p.encoder_cuts.empty()) ||
         (p.decoder_parts > 1 && p.decoder_cuts.empty() && p.placement != PlacementKind::kMirrored);
}

bool ApplyTimeBalance(const LevelTimes& times, Config* config) {
  PipelineConfig& p = config->pipeline;
  const size_t L = times.decoder_ms.size();
  if (times.encoder_ms.size() != L + 1 || L == 0) {
    throw RuntimeError("level times: " + std::to_string(times.encoder_ms.size()) + " encoder and " +
                       std::to_string(L) + " decoder levels; expected L+1 and L with L >= 1");
  }
  bool filled = false;
  if (p.encoder_parts > 1 && p.encoder_cuts.empty()) {
    std::vector<double> ms = times.encoder_ms;
    std::string key = "config: pipeline.encoder_parts";
    if (p.placement ==
        PlacementKind::kMirrored) {  // a device runs encoder level i and decoder level i
      ms.pop_back();
      for (size_t i = 0; i < L; ++i) ms[i] += times.decoder_ms[i];
      ms[L - 1] += times.encoder_ms[L];
      key += " (mirrored: the bottleneck shares level " + std::to_string(L - 1) + "'s part)";
    }
    p.encoder_cuts = BalancedCuts(Micros(ms), p.encoder_parts, key);
    filled = true;
  }
  if (p.decoder_parts > 1 && p.decoder_cuts.empty() && p.placement != PlacementKind::kMirrored) {
    std::vector<double> run_order(times.decoder_ms.rbegin(), times.decoder_ms.rend());
    p.decoder_cuts =
        BalancedCuts(Micros(run_order), p.decoder_parts, "config: pipeline.decoder_parts");
    filled = true;
  }
  return filled;
}

std::vector<double> PartTimes(const LevelTimes& times, const PipelineLayout& layout) {
  std::vector<double> out;
  for (const StageSpec& s : layout.stages) {
    const std::vector<double>& ms = s.encoder ? times.encoder_ms : times.decoder_ms;
    double sum = 0;
    for (int l = s.lo; l <= s.hi && l < static_cast<int>(ms.size()); ++l)
      sum += ms[static_cast<size_t>(l)];
    out.push_back(sum);
  }
  return out;
}

}  // namespace up
