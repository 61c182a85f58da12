// See bench_util.h.
#include "bench/bench_util.h"

#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/base/errors.h"
#include "common/base/json_writer.h"

namespace up::bench {

namespace fs = std::filesystem;

double Median(std::vector<double> values) {
  if (values.empty()) return std::nan("");
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

std::optional<double> JsonNumber(const std::string& json, const std::string& key, size_t from) {
  const std::string needle = "\"" + key + "\":";
  const size_t at = json.find(needle, from);
  if (at == std::string::npos) return std::nullopt;
  const char* start = json.c_str() + at + needle.size();
  char* end = nullptr;
  const double v = std::strtod(start, &end);
  if (end == start) return std::nullopt;
  return v;
}

std::optional<double> JsonNestedNumber(const std::string& json, const std::string& outer,
                                       const std::string& inner) {
  const size_t at = json.find("\"" + outer + "\":{");
  if (at == std::string::npos) return std::nullopt;
  const size_t close = json.find('}', at);
  std::optional<double> v = JsonNumber(json, inner, at);
  const size_t inner_at = json.find("\"" + inner + "\":", at);
  if (!v || inner_at > close) return std::nullopt;  // the key belongs to a later object
  return v;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw RuntimeError("cannot read " + path + "; did the run write it?");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<double> JsonLinesNumbers(const std::string& path, const std::string& key) {
  std::istringstream lines(ReadFile(path));
  std::vector<double> out;
  for (std::string line; std::getline(lines, line);) {
    if (auto v = JsonNumber(line, key)) out.push_back(*v);
  }
  return out;
}

std::string SelfExe() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec)
    throw RuntimeError("cannot read /proc/self/exe (" + ec.message() + "); is /proc mounted?");
  return self.string();
}

std::string JsonStrings(const std::vector<std::string>& values) {
  std::string out;
  for (const std::string& v : values) out += (out.empty() ? "" : ",") + JsonWriter::Quote(v);
  return "[" + out + "]";
}

std::string BytesText(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  double v = static_cast<double>(bytes);
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), v == std::floor(v) ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

TempFolder::TempFolder() {
  char pattern[] = "/tmp/up-bench-XXXXXX";
  if (!::mkdtemp(pattern))
    throw RuntimeError("cannot create a scratch folder under /tmp; check that it is writable");
  path_ = pattern;
}

TempFolder::~TempFolder() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

}  // namespace up::bench
