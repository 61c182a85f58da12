// docs/CONFIG.md stays true: every key the config parser knows has a row
// there with its default, and every row names a key the parser knows.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "common/config/config_file.h"

namespace up {
namespace {

// Dotted key -> default as written in a doc cell ("batch", "[8, 16, 32, 64]").
void Flatten(const YAML::Node& node, const std::string& prefix,
             std::map<std::string, std::string>* out) {
  for (const auto& kv : node) {
    const std::string key = (prefix.empty() ? "" : prefix + ".") + kv.first.as<std::string>();
    if (kv.second.IsMap()) {
      Flatten(kv.second, key, out);
    } else if (kv.second.IsSequence()) {
      std::string text = "[";
      for (size_t i = 0; i < kv.second.size(); ++i)
        text += (i ? ", " : "") + kv.second[i].as<std::string>();
      (*out)[key] = text + "]";
    } else {
      (*out)[key] = kv.second.as<std::string>();
    }
  }
}

std::map<std::string, std::string> DocRows() {
  std::ifstream f(std::string(UP_SOURCE_DIR) + "/docs/CONFIG.md");
  std::stringstream text;
  text << f.rdbuf();
  std::map<std::string, std::string> rows;  // key -> default cell's first `...`
  const std::regex row(R"(^\| `([a-z_.]+)` \| `([^`]*)`)");
  std::string line;
  while (std::getline(text, line)) {
    std::smatch m;
    if (std::regex_search(line, m, row)) rows[m[1]] = m[2];
  }
  return rows;
}

TEST(ConfigDoc, EveryKeyIsDocumentedWithItsDefault) {
  std::map<std::string, std::string> keys;
  Flatten(YAML::Load(DumpConfig(Config{})), "", &keys);
  ASSERT_GT(keys.size(), 30u);
  const auto rows = DocRows();
  for (const auto& [key, value] : keys) {
    auto it = rows.find(key);
    ASSERT_NE(it, rows.end()) << key << " has no row in docs/CONFIG.md";
    EXPECT_EQ(it->second, value.empty() ? "\"\"" : value) << key << " default";
  }
}

TEST(ConfigDoc, EveryDocumentedKeyIsKnown) {
  const std::vector<std::string>& keys = ConfigKeys();
  for (const auto& [key, value] : DocRows())
    EXPECT_NE(std::find(keys.begin(), keys.end(), key), keys.end())
        << "docs/CONFIG.md documents '" << key << "', unknown to the parser";
}

TEST(ConfigDoc, KeysOfEveryModelKindAreDocumented) {
  const auto rows = DocRows();
  for (const std::string& key : ConfigKeys())
    EXPECT_TRUE(rows.count(key)) << key << " has no row in docs/CONFIG.md";
}

}  // namespace
}  // namespace up
