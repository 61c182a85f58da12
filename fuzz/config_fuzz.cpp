// Arbitrary YAML text as a config file: LoadConfigFromString accepts it or
// throws one UsageError; an accepted config dumps to YAML that loads back to
// the same config (the run folder's config.yaml must always be loadable).
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/base/errors.h"
#include "common/config/config_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  up::Config config;
  try {
    config = up::LoadConfigFromString(text, "fuzz input", {});
  } catch (const up::UsageError&) {
    return 0;
  }
  const std::string dumped = up::DumpConfig(config);
  const up::Config again = up::LoadConfigFromString(dumped, "dumped fuzz config", {});
  if (up::DumpConfig(again) != dumped) __builtin_trap();
  return 0;
}
