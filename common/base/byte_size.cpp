// See byte_size.h.
#include "common/base/byte_size.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

#include "common/base/errors.h"

namespace up {

int64_t ParseByteSize(const std::string& text, const std::string& what) {
  const std::string bad =
      what + " = " + text + ": expected a size like 16GiB, 12000MiB, 1.5GB or a number of bytes";
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
    ++i;
  std::string unit = text.substr(i);
  unit.erase(std::remove(unit.begin(), unit.end(), ' '), unit.end());
  for (char& ch : unit) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  double value = 0;
  try {
    size_t used = 0;
    value = std::stod(text.substr(0, i), &used);
    if (used != i) throw UsageError(bad);
  } catch (const std::exception&) {
    throw UsageError(bad);
  }
  double scale = 0;
  if (unit.empty() || unit == "b") scale = 1;
  if (unit == "kib" || unit == "k") scale = 1024.0;
  if (unit == "mib" || unit == "m") scale = 1024.0 * 1024;
  if (unit == "gib" || unit == "g") scale = 1024.0 * 1024 * 1024;
  if (unit == "tib" || unit == "t") scale = 1024.0 * 1024 * 1024 * 1024;
  if (unit == "kb") scale = 1e3;
  if (unit == "mb") scale = 1e6;
  if (unit == "gb") scale = 1e9;
  if (unit == "tb") scale = 1e12;
  const double bytes = value * scale;
  if (scale == 0 || !(bytes >= 1) || bytes > 9.0e18) throw UsageError(bad);
  return static_cast<int64_t>(std::llround(bytes));
}

std::string FormatBytes(int64_t bytes) {
  char buf[32];
  if (bytes >= (1LL << 30)) {
    std::snprintf(buf, sizeof(buf), "%.1f GiB", bytes / 1073741824.0);
  } else if (bytes >= (1LL << 20)) {
    std::snprintf(buf, sizeof(buf), "%.0f MiB", bytes / 1048576.0);
  } else {
    std::snprintf(buf, sizeof(buf), "%.0f KiB", bytes / 1024.0);
  }
  return buf;
}

}  // namespace up
