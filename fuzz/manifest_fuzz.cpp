// Arbitrary text as a checkpoint's manifest.json: ParseManifest accepts it or
// throws one RuntimeError; an accepted manifest written back by ManifestJson
// parses to the same values (the writer and the reader agree).
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/base/errors.h"
#include "common/run/checkpoint_manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  up::CheckpointManifest m;
  try {
    m = up::ParseManifest(text);
  } catch (const up::RuntimeError&) {
    return 0;
  }
  const up::CheckpointManifest again = up::ParseManifest(up::ManifestJson(m));
  if (again.step != m.step || again.model_signature != m.model_signature ||
      again.config_sha256 != m.config_sha256 || again.files.size() != m.files.size())
    __builtin_trap();
  for (size_t i = 0; i < m.files.size(); ++i) {
    if (again.files[i].name != m.files[i].name || again.files[i].bytes != m.files[i].bytes ||
        again.files[i].sha256 != m.files[i].sha256)
      __builtin_trap();
  }
  return 0;
}
