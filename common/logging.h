// Logging for every process, behind plain functions so spdlog stays out of
// public headers. Lines go to stderr (and to a file when one is set), each
// carrying the process name: "[encoder] ...".
#pragma once

#include <sstream>
#include <string>
#include <utility>

namespace up {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kOff = 4 };

// Once per process, before logging. `file` may be empty (stderr only).
void InitLogging(const std::string& process_name, LogLevel level, const std::string& file = "");

void LogDebug(const std::string& message);
void LogInfo(const std::string& message);
void LogWarn(const std::string& message);
void LogError(const std::string& message);

// Str("step ", 3, " loss ", 0.5): concatenation through operator<<.
template <typename... Args>
std::string Str(Args&&... args) {
  std::ostringstream s;
  (s << ... << std::forward<Args>(args));
  return s.str();
}

}  // namespace up
