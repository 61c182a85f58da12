// Parsing a command's arguments the same way in every binary: one UsageError
// line that points at the command's --help, and -v/-q as a log level.
#pragma once

#include <cxxopts.hpp>
#include <optional>
#include <string>

#include "common/base/logging.h"

namespace up {

// Parses argv with `options`. A cxxopts error or an argument no option takes
// throws UsageError("<what>; see `<help_command>`"). With --help ("h,help"
// must be among the options) prints the help and returns nullopt.
std::optional<cxxopts::ParseResult> ParseCommandLine(cxxopts::Options& options, int argc,
                                                     char** argv, const std::string& help_command);

// -q/--quiet: warnings and errors; -v/--verbose: debug; neither: info. The
// options must define both.
LogLevel VerbosityOf(const cxxopts::ParseResult& args);

}  // namespace up
