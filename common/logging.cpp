// spdlog-backed implementation of logging.h.
#include "common/logging.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace up {
namespace {

std::shared_ptr<spdlog::logger>& Logger() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto l = std::make_shared<spdlog::logger>(
        "up", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
    l->set_pattern("[%n] %v");
    return l;
  }();
  return logger;
}

}  // namespace

void InitLogging(const std::string& process_name, LogLevel level, const std::string& file) {
  std::vector<spdlog::sink_ptr> sinks;
  auto console = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  console->set_pattern("[%n] %^%v%$");
  sinks.push_back(console);
  if (!file.empty()) {
    auto f = std::make_shared<spdlog::sinks::basic_file_sink_mt>(file);
    f->set_pattern("%Y-%m-%dT%H:%M:%S.%e [%n] %l: %v");
    sinks.push_back(f);
  }
  auto logger = std::make_shared<spdlog::logger>(process_name, sinks.begin(), sinks.end());
  logger->set_level(static_cast<spdlog::level::level_enum>(static_cast<int>(level) + 1));
  logger->flush_on(spdlog::level::info);
  Logger() = logger;
}

void LogDebug(const std::string& m) { Logger()->debug(m); }
void LogInfo(const std::string& m) { Logger()->info(m); }
void LogWarn(const std::string& m) { Logger()->warn("warning: " + m); }
void LogError(const std::string& m) { Logger()->error("error: " + m); }

}  // namespace up
