// Parsing a command's arguments the same way in every binary: one UsageError
// line that points at the command's --help, and -v/-q as a log level.
#pragma once

#include <algorithm>
#include <cxxopts.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/base/errors.h"
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

// --way NAME (repeatable) for a command that runs several ways: keeps the
// items of `ways` whose name_of(item) is among `names`, in their order (all
// when `names` is empty). A name no item has is a UsageError listing them:
// "--way 'NAME' is not a way <who> for this config; use one of 'a', 'b'".
template <typename Way, typename NameOf>
void KeepNamedWays(const std::vector<std::string>& names, NameOf name_of, const std::string& who,
                   std::vector<Way>* ways) {
  if (names.empty()) return;
  auto named = [&](const Way& w) {
    return std::find(names.begin(), names.end(), name_of(w)) != names.end();
  };
  for (const std::string& name : names) {
    if (std::any_of(ways->begin(), ways->end(), [&](const Way& w) { return name_of(w) == name; }))
      continue;
    std::string all;
    for (const Way& w : *ways) all += (all.empty() ? "'" : ", '") + name_of(w) + "'";
    throw UsageError("--way '" + name + "' is not a way " + who + " for this config; use one of " +
                     all);
  }
  ways->erase(std::remove_if(ways->begin(), ways->end(), [&](const Way& w) { return !named(w); }),
              ways->end());
}

}  // namespace up
