// See metrics_format.h.
#include "common/run/metrics_format.h"

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <limits>
#include <sstream>

#include "common/base/fs_util.h"
#include "common/base/json_writer.h"

namespace up {
namespace {

namespace fs = std::filesystem;

double NumberOr(const YAML::Node& line, const char* key) {
  const YAML::Node v = line[key];
  if (!v || v.IsNull()) return std::numeric_limits<double>::quiet_NaN();
  return v.as<double>();
}

}  // namespace

std::string MetricsLine(const StepMetrics& m) {
  JsonWriter line;
  line.Field(kMetricStep, m.step)
      .Field(kMetricLoss, m.loss)
      .Field(kMetricDice, m.dice)
      .Field("lr", m.lr)
      .Field(kMetricStepSeconds, m.step_s)
      .Field("samples_per_s", m.samples_per_s)
      .Field("data_wait_s", m.data_wait_s);
  if (m.fp16) {
    line.Field("loss_scale", m.fp16->loss_scale)
        .Field("skipped", m.fp16->skipped)
        .Field("skipped_steps", m.fp16->skipped_steps);
  }
  if (m.validation) {
    line.Field(kMetricValDice, m.validation->mean);
    for (const auto& [key, dice] : m.validation->entries)
      line.Field(std::string(kMetricValDice) + "_" + key, dice);
    line.Field("val_cases", m.validation->cases).Field("val_s", m.validation->seconds);
  }
  return line.str();
}

std::vector<MetricsPoint> ReadMetricsFile(const std::string& path) {
  std::vector<MetricsPoint> out;
  std::istringstream lines(ReadFile(path));
  for (std::string text; std::getline(lines, text);) {
    if (text.empty()) continue;
    try {
      const YAML::Node line = YAML::Load(text);
      if (!line.IsMap() || !line[kMetricStep]) continue;
      out.push_back({line[kMetricStep].as<int64_t>(), NumberOr(line, kMetricLoss),
                     NumberOr(line, kMetricDice), NumberOr(line, kMetricValDice)});
    } catch (const YAML::Exception&) {
      // A torn line (the process died while appending): not a step.
    }
  }
  return out;
}

std::string WriteTrainingCurves(const std::string& run_dir) {
  const fs::path dir(run_dir);
  const std::vector<MetricsPoint> points = ReadMetricsFile((dir / kMetricsFile).string());
  const std::string path = (dir / kCurvesFile).string();
  WriteFileAtomic(
      path, TrainingCurvesSvg(points, "training curves: " + fs::absolute(dir).filename().string()));
  return path;
}

}  // namespace up
