// See run_dir.h.
#include "common/run/run_dir.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "common/base/errors.h"
#include "common/base/fs_util.h"
#include "common/config/config_file.h"
#include "common/run/metrics_format.h"

namespace up {
namespace {

namespace fs = std::filesystem;

FILE* OpenMetrics(const std::string& dir, const char* mode) {
  const std::string path = (fs::path(dir) / kMetricsFile).string();
  FILE* f = std::fopen(path.c_str(), mode);
  if (!f) throw RuntimeError("cannot open '" + path + "': " + std::strerror(errno));
  return f;
}

}  // namespace

void RunDir::FileCloser::operator()(FILE* f) const {
  if (f) std::fclose(f);
}

RunDir RunDir::Create(const std::string& path, const Config& config) {
  std::error_code ec;
  if (fs::exists(fs::path(path) / "config.yaml", ec) ||
      fs::exists(fs::path(path) / "checkpoints", ec)) {
    throw UsageError("--out " + path +
                     ": this folder already holds a run; continue it with --resume " + path +
                     " or choose another --out");
  }
  fs::create_directories(path, ec);
  if (ec) throw UsageError("--out " + path + ": cannot create the run folder: " + ec.message());
  WriteFileAtomic((fs::path(path) / "config.yaml").string(), DumpConfig(config));
  return RunDir(path, OpenMetrics(path, "w"));
}

Config RunDir::LoadConfigOf(const std::string& path, const std::vector<std::string>& overrides) {
  const std::string file = (fs::path(path) / "config.yaml").string();
  std::error_code ec;
  if (!fs::exists(file, ec)) {
    throw UsageError("--resume " + path +
                     ": no run here (missing config.yaml); give the --out folder of a run");
  }
  return LoadConfig(file, overrides);
}

RunDir RunDir::Reopen(const std::string& path, const Config& config, int64_t completed_steps) {
  WriteFileAtomic((fs::path(path) / "config.yaml").string(), DumpConfig(config));
  // Keep only the metrics of steps the checkpoint covers.
  const std::string metrics_path = (fs::path(path) / kMetricsFile).string();
  std::string kept;
  if (fs::exists(metrics_path)) {
    std::istringstream lines(ReadFile(metrics_path));
    for (std::string line; std::getline(lines, line);) {
      if (line.empty()) continue;
      try {
        if (YAML::Load(line)["step"].as<int64_t>() <= completed_steps) kept += line + "\n";
      } catch (const std::exception&) {
        // A torn last line from a crash: dropped.
      }
    }
  }
  WriteFileAtomic(metrics_path, kept);
  return RunDir(path, OpenMetrics(path, "a"));
}

void RunDir::AppendMetrics(const std::string& json_object) {
  if (std::fputs((json_object + "\n").c_str(), metrics_.get()) < 0 ||
      std::fflush(metrics_.get()) != 0) {
    throw RuntimeError("cannot append to " + path_ + "/metrics.jsonl: " + std::strerror(errno) +
                       "; free space on the file system holding the run folder (df -h " + path_ +
                       ")");
  }
}

void RunDir::WriteSummary(const std::string& json_object) {
  WriteFileAtomic((fs::path(path_) / "summary.json").string(), json_object + "\n");
}

}  // namespace up
