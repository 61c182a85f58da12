// See command_line.h.
#include "common/base/command_line.h"

#include <iostream>

#include "common/base/errors.h"

namespace up {

std::optional<cxxopts::ParseResult> ParseCommandLine(cxxopts::Options& options, int argc,
                                                     char** argv, const std::string& help_command) {
  const std::string see = "; see `" + help_command + "`";
  cxxopts::ParseResult args;
  try {
    args = options.parse(argc, argv);
  } catch (const cxxopts::exceptions::exception& e) {
    throw UsageError(e.what() + see);
  }
  if (args.count("help")) {
    std::cout << options.help() << std::endl;
    return std::nullopt;
  }
  if (!args.unmatched().empty()) {
    throw UsageError("unexpected argument '" + args.unmatched()[0] + "'" + see);
  }
  return args;
}

LogLevel VerbosityOf(const cxxopts::ParseResult& args) {
  if (args.count("quiet")) return LogLevel::kWarn;
  if (args.count("verbose")) return LogLevel::kDebug;
  return LogLevel::kInfo;
}

}  // namespace up
