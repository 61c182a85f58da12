// docs/CONFIG.md stays true to the key table (common/config/config_keys.h):
// every key has a row there whose default cell shows the table's default,
// every row names a key of the table, and a choice key's row names each of
// its choices.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "common/config/config_file.h"
#include "common/config/config_keys.h"

namespace up {
namespace config_doc_test {

struct DocRow {
  std::string shown_default;  // the default cell's first `...`
  std::string text;           // the whole row
};

std::map<std::string, DocRow> DocRows() {
  std::ifstream f(std::string(UP_SOURCE_DIR) + "/docs/CONFIG.md");
  std::stringstream text;
  text << f.rdbuf();
  std::map<std::string, DocRow> rows;
  const std::regex row(R"(^\| `([a-z_.]+)` \| `([^`]*)`)");
  std::string line;
  while (std::getline(text, line)) {
    std::smatch m;
    if (std::regex_search(line, m, row)) rows[m[1]] = {m[2], line};
  }
  return rows;
}

TEST(ConfigDoc, EveryKeyIsDocumentedWithItsDefault) {
  const Config defaults = LoadConfig("", {});
  const auto rows = DocRows();
  ASSERT_GT(ConfigKeyTable().size(), 70u);
  for (const ConfigKey& key : ConfigKeyTable()) {
    auto it = rows.find(key.path);
    ASSERT_NE(it, rows.end()) << key.path << " has no row in docs/CONFIG.md";
    const std::string shown = ShownDefault(key, defaults);
    EXPECT_EQ(it->second.shown_default, shown.empty() ? "\"\"" : shown) << key.path << " default";
  }
}

TEST(ConfigDoc, EveryDocumentedKeyIsKnown) {
  for (const auto& [path, row] : DocRows())
    EXPECT_NE(FindConfigKey(path), nullptr)
        << "docs/CONFIG.md documents '" << path << "', unknown to the key table";
}

TEST(ConfigDoc, EveryChoiceIsNamedInItsRow) {
  const auto rows = DocRows();
  for (const ConfigKey& key : ConfigKeyTable()) {
    if (key.type != KeyType::kChoice && key.type != KeyType::kSubset) continue;
    const std::string& text = rows.at(key.path).text;
    for (const std::string& choice : key.choices)
      EXPECT_NE(text.find("`" + choice + "`"), std::string::npos)
          << key.path << "'s row in docs/CONFIG.md does not name `" << choice << "`";
  }
}

}  // namespace config_doc_test
}  // namespace up
