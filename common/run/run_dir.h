// The run folder, the same for the reference trainer and the pipeline:
//   config.yaml     the resolved config (written at start, rewritten on resume)
//   metrics.jsonl   one JSON object per optimizer step, appended and flushed
//   checkpoints/    see checkpoint.h
//   summary.json    written atomically at the end
// A folder that already holds a run is never overwritten: a new run there is
// refused (use --resume), so nothing already saved is lost.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common/config/config.h"

namespace up {

class RunDir {
 public:
  // A new run in `path` (created if missing; refused if it holds a run).
  static RunDir Create(const std::string& path, const Config& config);
  // The config of the run in `path`, with `overrides` applied on top.
  static Config LoadConfigOf(const std::string& path, const std::vector<std::string>& overrides);
  // Continue the run in `path` after `completed_steps` steps: rewrites
  // config.yaml and drops metrics lines of later steps.
  static RunDir Reopen(const std::string& path, const Config& config, int64_t completed_steps);

  RunDir(RunDir&&) = default;
  RunDir& operator=(RunDir&&) = default;

  const std::string& path() const { return path_; }
  void AppendMetrics(const std::string& json_object);
  void WriteSummary(const std::string& json_object);

 private:
  struct FileCloser {
    void operator()(FILE* f) const;
  };
  RunDir(std::string path, FILE* metrics) : path_(std::move(path)), metrics_(metrics) {}

  std::string path_;
  std::unique_ptr<FILE, FileCloser> metrics_;
};

}  // namespace up
