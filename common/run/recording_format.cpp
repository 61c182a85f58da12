// See recording_format.h.
#include "common/run/recording_format.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "common/base/errors.h"
#include "common/base/fs_util.h"
#include "common/base/json_writer.h"
#include "common/base/sha256.h"

namespace up::recording {
namespace {

namespace fs = std::filesystem;

std::string Suffix(int64_t step) { return "-s" + std::to_string(step); }

}  // namespace

std::string BoundaryFile(const std::string& direction, int64_t step, int micro_batch, int channel) {
  return (direction == "forward" ? "fwd" : "bwd") +
         (channel < 0 ? std::string() : "-c" + std::to_string(channel)) + Suffix(step) + "-m" +
         std::to_string(micro_batch) + ".pt";
}
std::string WeightsFile(const std::string& stage, int64_t step) {
  return stage + "-weights" + Suffix(step) + ".pt";
}
std::string StageFile(const std::string& stage, int64_t step) {
  return stage + Suffix(step) + ".stage";
}
std::string StepNormsFile(const std::string& stage, int64_t step) {
  return stage + "-step-norms" + Suffix(step) + ".pt";
}
std::string PartIndexFile(const std::string& stage) { return stage + ".jsonl"; }

const Entry* Index::Find(const std::string& kind, const std::string& who, int64_t step,
                         int micro_batch) const {
  for (const Entry& e : entries) {
    if (e.kind == kind && e.stage == who && e.step == step && e.micro_batch == micro_batch)
      return &e;
  }
  return nullptr;
}

const Entry* Index::FindBoundary(const std::string& direction, int channel, int64_t step,
                                 int micro_batch) const {
  for (const Entry& e : entries) {
    if (e.kind == "boundary" && e.direction == direction && e.channel == channel &&
        e.step == step && e.micro_batch == micro_batch)
      return &e;
  }
  return nullptr;
}

Index ReadIndex(const std::string& dir) {
  const std::string path = (fs::path(dir) / kIndexFile).string();
  if (!fs::exists(path)) {
    throw UsageError("'" + dir + "' is not a recording: it has no " + kIndexFile +
                     " (record one with `unet-pipeline train --record DIR`)");
  }
  try {
    const YAML::Node root = YAML::Load(ReadFile(path));
    if (root["format"].as<std::string>("") != kFormat)
      throw std::runtime_error("format is not " + std::string(kFormat));
    Index index;
    index.micro_batches = root["micro_batches"].as<int>();
    for (const auto& s : root["steps"]) index.steps.push_back(s.as<int64_t>());
    for (const auto& n : root["entries"]) {
      Entry e;
      e.kind = n["kind"].as<std::string>();
      e.stage = n["stage"].as<std::string>("");
      e.file = n["file"].as<std::string>("");
      e.direction = n["direction"].as<std::string>("");
      e.channel = n["channel"].as<int>(0);
      e.step = n["step"].as<int64_t>(-1);
      e.micro_batch = n["micro_batch"].as<int>(-1);
      e.value = n["value"].as<double>(0);
      index.entries.push_back(e);
    }
    return index;
  } catch (const std::exception& e) {
    throw UsageError("recording index '" + path + "' is malformed: " + e.what());
  }
}

void WriteIndex(const std::string& dir, const std::string& config_yaml, int micro_batches,
                const std::vector<std::string>& stages) {
  std::string entries, stage_list;
  std::set<int64_t> steps;
  for (const std::string& stage : stages) {
    stage_list += (stage_list.empty() ? "\"" : ",\"") + stage + "\"";
    std::ifstream in(fs::path(dir) / PartIndexFile(stage));
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      entries += (entries.empty() ? "\n  " : ",\n  ") + line;
      const YAML::Node n = YAML::Load(line);
      if (n["kind"].as<std::string>() == "boundary") steps.insert(n["step"].as<int64_t>());
    }
  }
  std::string step_list;
  for (int64_t s : steps) step_list += (step_list.empty() ? "" : ",") + std::to_string(s);
  JsonWriter head;
  head.Field("format", kFormat)
      .Field("version", kVersion)
      .Field("config", kConfigFile)
      .Field("config_sha256", Sha256Hex(config_yaml))
      .Field("micro_batches", micro_batches)
      .Raw("steps", "[" + step_list + "]")
      .Raw("stages", "[" + stage_list + "]");
  std::string text = head.str();
  text.pop_back();  // reopen the object to append the entries
  text += ",\"entries\":[" + entries + "\n]}\n";
  WriteFileAtomic((fs::path(dir) / kIndexFile).string(), text);
}

}  // namespace up::recording
