// Small helpers shared by the `unet-pipeline bench` commands: statistics, a
// scratch folder, and reading numbers back out of the JSON the trainers write
// (metrics.jsonl lines and summary.json, both flat or one level nested, as
// JsonWriter makes them). Nothing here is thread-safe beyond what each
// function's own state makes it (all are free of shared state except TempFolder,
// which owns its directory).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace up::bench {

// The median (mean of the middle two for an even count); NaN if empty.
double Median(std::vector<double> values);

// The number after `"key":` in `json`, searching from `from` (an offset, e.g.
// of an enclosing key); nullopt if the key is missing or not a number.
std::optional<double> JsonNumber(const std::string& json, const std::string& key, size_t from = 0);
// The number at `"outer":{... "inner": N ...}` (one level of nesting).
std::optional<double> JsonNestedNumber(const std::string& json, const std::string& outer,
                                       const std::string& inner);

// Every line's `key` of a JSON-lines file, in order; lines without it are
// skipped. RuntimeError if the file cannot be read.
std::vector<double> JsonLinesNumbers(const std::string& path, const std::string& key);

// The whole file; RuntimeError naming it if it cannot be read.
std::string ReadFile(const std::string& path);

// The running binary (/proc/self/exe), for re-running it as `train`.
std::string SelfExe();

// ["a","b"]: a JSON array of strings.
std::string JsonStrings(const std::vector<std::string>& values);

// "4 KiB", "16 MiB", "1 GiB".
std::string BytesText(uint64_t bytes);

// A fresh directory /tmp/up-bench-XXXXXX, removed with its contents by the
// destructor. Not copyable.
class TempFolder {
 public:
  TempFolder();
  ~TempFolder();
  TempFolder(const TempFolder&) = delete;
  TempFolder& operator=(const TempFolder&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace up::bench
