// spdlog-backed implementation of logging.h. The console sink is wrapped so
// that a log line first wipes the live status line and then redraws it.
#include "common/base/logging.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdio>
#include <mutex>

namespace up {
namespace {

constexpr const char* kFilePattern = "%Y-%m-%dT%H:%M:%S.%e [%n] %l: %v";

// The live status line; guarded by its mutex, written to stderr.
struct Status {
  std::mutex mutex;
  std::string text;
  bool shown = false;
};
Status& TheStatus() {
  static Status status;
  return status;
}

void WipeLocked(Status& s) {
  if (s.shown) std::fputs("\r\033[K", stderr);
}
void DrawLocked(Status& s) {
  if (s.text.empty()) return;
  std::fputs(("\r\033[K" + s.text).c_str(), stderr);
  std::fflush(stderr);
  s.shown = true;
}

// Forwards to the colour console sink, keeping the status line below the logs.
class StatusAwareConsole final : public spdlog::sinks::sink {
 public:
  StatusAwareConsole() : inner_(std::make_shared<spdlog::sinks::stderr_color_sink_mt>()) {}
  void log(const spdlog::details::log_msg& msg) override {
    Status& s = TheStatus();
    std::lock_guard<std::mutex> lock(s.mutex);
    WipeLocked(s);
    inner_->log(msg);
    inner_->flush();
    DrawLocked(s);
  }
  void flush() override { inner_->flush(); }
  void set_pattern(const std::string& pattern) override { inner_->set_pattern(pattern); }
  void set_formatter(std::unique_ptr<spdlog::formatter> f) override {
    inner_->set_formatter(std::move(f));
  }

 private:
  std::shared_ptr<spdlog::sinks::stderr_color_sink_mt> inner_;
};

std::shared_ptr<spdlog::logger> MakeLogger(const std::string& name) {
  auto console = std::make_shared<StatusAwareConsole>();
  console->set_pattern("[%n] %^%v%$");
  return std::make_shared<spdlog::logger>(name, console);
}

std::shared_ptr<spdlog::logger>& Logger() {
  static std::shared_ptr<spdlog::logger> logger = MakeLogger("up");
  return logger;
}

// The same name and level as Logger(), with only its file sinks.
std::shared_ptr<spdlog::logger>& FileLogger() {
  static std::shared_ptr<spdlog::logger> logger = std::make_shared<spdlog::logger>("up");
  return logger;
}

std::mutex& SetupMutex() {
  static std::mutex m;
  return m;
}

}  // namespace

void InitLogging(const std::string& process_name, LogLevel level, const std::string& file,
                 LogLevel console_floor) {
  std::lock_guard<std::mutex> lock(SetupMutex());
  auto logger = MakeLogger(process_name);
  logger->sinks().front()->set_level(
      static_cast<spdlog::level::level_enum>(static_cast<int>(console_floor) + 1));
  auto files = std::make_shared<spdlog::logger>(process_name);
  const auto spd_level = static_cast<spdlog::level::level_enum>(static_cast<int>(level) + 1);
  for (auto* l : {&logger, &files}) {
    (*l)->set_level(spd_level);
    (*l)->flush_on(spdlog::level::info);
  }
  Logger() = logger;
  FileLogger() = files;
  if (!file.empty()) {
    auto f = std::make_shared<spdlog::sinks::basic_file_sink_mt>(file);
    f->set_pattern(kFilePattern);
    Logger()->sinks().push_back(f);
    FileLogger()->sinks().push_back(f);
  }
}

void AddLogFile(const std::string& file) {
  std::lock_guard<std::mutex> lock(SetupMutex());
  auto f = std::make_shared<spdlog::sinks::basic_file_sink_mt>(file);
  f->set_pattern(kFilePattern);
  Logger()->sinks().push_back(f);
  FileLogger()->sinks().push_back(f);
}

bool LogEnabled(LogLevel level) {
  return Logger()->should_log(static_cast<spdlog::level::level_enum>(static_cast<int>(level) + 1));
}

void LogDebug(const std::string& m) { Logger()->debug(m); }
void LogInfo(const std::string& m) { Logger()->info(m); }
void LogWarn(const std::string& m) { Logger()->warn("warning: " + m); }
void LogError(const std::string& m) { Logger()->error("error: " + m); }
void LogInfoToFiles(const std::string& m) { FileLogger()->info(m); }

bool StderrIsTerminal() { return isatty(STDERR_FILENO) == 1; }

void ShowStatusLine(const std::string& text) {
  winsize ws{};
  const size_t width =
      ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1 ? ws.ws_col - 1 : 119;
  Status& s = TheStatus();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.text = text.size() > width ? text.substr(0, width) : text;
  DrawLocked(s);
}

void EndStatusLine() {
  Status& s = TheStatus();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.shown) std::fputs("\n", stderr);
  std::fflush(stderr);
  s.shown = false;
  s.text.clear();
}

}  // namespace up
