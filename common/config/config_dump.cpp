// The resolved config written out (DumpConfig) and hashed (ConfigHash), both
// from the key table (config_keys.h).
#include <string>
#include <vector>

#include "common/base/sha256.h"
#include "common/config/config_file.h"
#include "common/config/config_keys.h"

namespace up {
namespace {

std::vector<std::string> PartsOf(const std::string& path) {
  std::vector<std::string> parts;
  size_t begin = 0;
  for (size_t dot = path.find('.'); dot != std::string::npos; dot = path.find('.', begin)) {
    parts.push_back(path.substr(begin, dot - begin));
    begin = dot + 1;
  }
  parts.push_back(path.substr(begin));
  return parts;
}

bool Hashed(const ConfigKey& key, const Config& c) {
  if (!key.written || !key.in_hash || !Applies(key.when, c)) return false;
  return key.hashed_at_default || KeyValueText(key, c) != KeyValueText(key, Config{});
}

}  // namespace

std::string DumpConfig(const Config& c) {
  std::string out;
  std::vector<std::string> open;  // the sections of the previous key, outermost first
  for (const ConfigKey& key : ConfigKeyTable()) {
    if (!key.written || !Applies(key.when, c)) continue;
    const std::vector<std::string> parts = PartsOf(key.path);
    const size_t depth = parts.size() - 1;
    size_t same = 0;  // sections shared with the previous key
    while (same < depth && same < open.size() && open[same] == parts[same]) ++same;
    for (size_t i = same; i < depth; ++i) out += std::string(2 * i, ' ') + parts[i] + ":\n";
    open.assign(parts.begin(), parts.end() - 1);
    out += std::string(2 * depth, ' ') + parts.back() + ": " + KeyValueText(key, c) + "\n";
  }
  return out;
}

std::string ConfigHash(const Config& c) {
  std::string text;
  for (const ConfigKey& key : ConfigKeyTable())
    if (Hashed(key, c)) text += key.path + "=" + KeyValueText(key, c) + "\n";
  return Sha256Hex(text);
}

}  // namespace up
