// Logging for every process, behind plain functions so spdlog stays out of
// public headers. Lines go to stderr (and to files when set), each carrying
// the process name: "[encoder] ...".
//
// A process may also show one live status line on a terminal (the launcher's
// progress): it is redrawn in place, and log lines printed meanwhile appear
// above it. All functions are thread-safe.
#pragma once

#include <sstream>
#include <string>
#include <utility>

namespace up {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kOff = 4 };

// Once per process, before logging. `file` may be empty (stderr only).
// `console_floor` raises the level for stderr alone (a stage started by the
// launcher keeps its info lines in its file and leaves the terminal to the
// launcher's progress line).
void InitLogging(const std::string& process_name, LogLevel level, const std::string& file = "",
                 LogLevel console_floor = LogLevel::kDebug);

// Also write every line from now on to `file` (appended; created if missing),
// with a timestamp and the level, e.g. the launcher's log in the run folder.
void AddLogFile(const std::string& file);

// Whether a message at `level` is printed.
bool LogEnabled(LogLevel level);

void LogDebug(const std::string& message);
void LogInfo(const std::string& message);
void LogWarn(const std::string& message);
void LogError(const std::string& message);
// Only to the files (not the terminal): what a live status line shows, kept
// in the log as plain lines.
void LogInfoToFiles(const std::string& message);

// Whether stderr is a terminal (live status lines are possible).
bool StderrIsTerminal();
// Shows `text` as the live status line (cut to the terminal's width),
// replacing the previous one. Only call when StderrIsTerminal().
void ShowStatusLine(const std::string& text);
// Leaves the current status line on screen as an ordinary line; the next
// ShowStatusLine starts a new one. No-op when none is shown.
void EndStatusLine();

// Str("step ", 3, " loss ", 0.5): concatenation through operator<<.
template <typename... Args>
std::string Str(Args&&... args) {
  std::ostringstream s;
  (s << ... << std::forward<Args>(args));
  return s.str();
}

}  // namespace up
