// See config_sources.h.
#include "common/config/config_sources.h"

#include <yaml-cpp/eventhandler.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <numeric>
#include <set>
#include <sstream>

#include "common/config/config_keys.h"
#include "common/config/config_text.h"

namespace up {
namespace {

bool IsLeaf(const std::string& path) { return FindConfigKey(path) != nullptr; }

bool IsSection(const std::string& path) {
  const std::vector<std::string>& s = ConfigSections();
  return std::find(s.begin(), s.end(), path) != s.end();
}

std::string LastPart(const std::string& path) {
  size_t dot = path.rfind('.');
  return dot == std::string::npos ? path : path.substr(dot + 1);
}

// The names of the direct children of a section, in table order.
std::vector<std::string> ChildrenOf(const std::string& section) {
  const std::string prefix = section.empty() ? "" : section + ".";
  std::vector<std::string> out;
  for (const ConfigKey& k : ConfigKeyTable()) {
    const std::string& key = k.path;
    if (key.compare(0, prefix.size(), prefix) != 0) continue;
    std::string child = key.substr(prefix.size(), key.find('.', prefix.size()) - prefix.size());
    if (std::find(out.begin(), out.end(), child) == out.end()) out.push_back(child);
  }
  return out;
}

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), size_t{0});
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1] ? 1 : 0)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// The known key most likely meant by `path`, or "" when none is close: the
// nearest by edit distance if within max(2, len/4) and shorter than the last
// name (so "train.zz" suggests nothing), else the nearest leaf with the same
// last name ("pipeline.encoder.device").
std::string Suggest(const std::string& path) {
  std::string best;
  size_t best_distance = SIZE_MAX;
  std::string same_name;
  size_t same_name_distance = SIZE_MAX;
  std::vector<std::string> candidates;
  for (const ConfigKey& k : ConfigKeyTable()) candidates.push_back(k.path);
  for (const auto& key : ConfigSections()) {
    if (!key.empty()) candidates.push_back(key);
  }
  for (const auto& key : candidates) {
    size_t d = EditDistance(path, key);
    if (d < best_distance) {
      best_distance = d;
      best = key;
    }
    if (IsLeaf(key) && LastPart(key) == LastPart(path) && d < same_name_distance) {
      same_name_distance = d;
      same_name = key;
    }
  }
  if (best_distance <= std::max<size_t>(2, path.size() / 4) &&
      best_distance < LastPart(path).size()) {
    return best;
  }
  return same_name;
}

[[noreturn]] void FailUnknownKey(const std::string& path) {
  std::string message = "unknown key '" + path + "'";
  std::string suggestion = Suggest(path);
  if (const ConfigKey* key = FindConfigKey(suggestion)) {
    ConfigFail(message + "; did you mean '" + suggestion + "' (" + key->Accepts() + ": " +
               key->doc + ")?");
  }
  if (!suggestion.empty()) ConfigFail(message + "; did you mean '" + suggestion + "'?");
  std::string parent = SectionOfKey(path);
  if (!IsSection(parent)) parent.clear();
  ConfigFail(message + "; known keys " +
             (parent.empty() ? "at the top level" : "under '" + parent + "'") + ": " +
             Join(ChildrenOf(parent), ", "));
}

void SetGiven(GivenKeys* given, const std::string& path, const YAML::Node& node) {
  given->erase(path);
  given->emplace(path, node);
}

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

// A ',' outside any [...] or {...} that is not inside a scalar (",a",
// "{a: 1},", "&x,") is not valid YAML. yaml-cpp 0.7 gets stuck on it (found
// by fuzz/config_fuzz); ParseYaml's bounded document loop would report that
// as "nothing can start here", but this check runs first to name the ','.
// Outside brackets, a ',' must lie inside a quoted or plain scalar
// ("path: a,b") or a comment.
void RejectStrayFlowEntry(const std::string& text, const std::string& origin) {
  auto blank = [&](size_t i) {
    return i >= text.size() || text[i] == ' ' || text[i] == '\t' || text[i] == '\r' ||
           text[i] == '\n';
  };
  const std::string indicators = ",[]{}#&*!|>'\"%@`";
  int depth = 0, line = 1;
  size_t line_begin = 0;
  char quote = 0;
  bool comment = false, plain = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
      line_begin = i + 1;
      comment = plain = false;
      continue;
    }
    if (comment) continue;
    if (quote) {
      if (escaped) {
        escaped = false;
      } else if (quote == '"' && c == '\\') {
        escaped = true;
      } else if (c == quote) {
        quote = 0;
      }
      continue;
    }
    const bool after_blank = i == 0 || blank(i - 1);
    if (blank(i)) continue;
    if (c == '#' && after_blank) {
      comment = true;
      continue;
    }
    if (plain) {
      if (c == ':' && blank(i + 1)) plain = false;  // the end of a key
      continue;                                     // anything else is part of the scalar
    }
    if ((c == '"' || c == '\'') &&
        (after_blank || (i > 0 && std::string("[{,:").find(text[i - 1]) != std::string::npos))) {
      quote = c;
    } else if (c == '[' || c == '{') {
      ++depth;
    } else if (c == ']' || c == '}') {
      depth = std::max(0, depth - 1);
    } else if (c == ',' && depth == 0) {
      ConfigFail(origin + ": not valid YAML: line " + std::to_string(line) + ", column " +
                 std::to_string(i - line_begin + 1) + ": ',' outside [...] or {...}");
    } else if (depth == 0 && indicators.find(c) == std::string::npos &&
               !((c == '-' || c == '?' || c == ':') && blank(i + 1))) {
      plain = true;  // a plain scalar starts: ',' may follow inside it
    }
  }
}

// Stops yaml-cpp's parser after three documents, keeping where each began.
// yaml-cpp 0.7's own LoadAll never returns on text where the parser meets a
// token that no rule consumes ("&a\xff,"...): every further call yields one
// more empty document at the same place, and the list grows until memory runs
// out (found by fuzz/config_fuzz). A config holds one document, so counting
// three is enough to tell "several documents" from "stuck".
class DocumentStarts : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override { marks.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}

  std::vector<YAML::Mark> marks;
};

std::string Where(const YAML::Mark& mark) {
  return "line " + std::to_string(mark.line + 1) + ", column " + std::to_string(mark.column + 1);
}

}  // namespace

std::string SectionExpectation(const std::string& section) {
  return "expected a mapping with keys " + Join(ChildrenOf(section), ", ");
}

// Adds every key of the mapping `node` (the section `prefix`) to `given`.
void FlattenInto(const YAML::Node& node, const std::string& prefix, const std::string& origin,
                 GivenKeys* given) {
  std::set<std::string> seen;
  for (const auto& kv : node) {
    if (!kv.first.IsScalar()) {
      ConfigFail(origin + ": key " + Render(kv.first) + " under '" + prefix +
                 "' is not a plain name");
    }
    std::string path = (prefix.empty() ? "" : prefix + ".") + kv.first.Scalar();
    if (!seen.insert(path).second) ConfigFail(origin + ": duplicate key '" + path + "'");
    if (IsLeaf(path)) {
      SetGiven(given, path, kv.second);
    } else if (IsSection(path)) {
      if (kv.second.IsNull()) continue;  // "model:" with nothing under it
      if (!kv.second.IsMap())
        ConfigFail(path + " = " + Render(kv.second) + ": " + SectionExpectation(path));
      FlattenInto(kv.second, path, origin, given);
    } else {
      FailUnknownKey(path);
    }
  }
}

YAML::Node ParseYaml(const std::string& text, const std::string& origin) {
  RejectStrayFlowEntry(text, origin);
  try {
    std::istringstream in(text);
    YAML::Parser parser(in);
    DocumentStarts starts;
    while (starts.marks.size() < 3 && parser.HandleNextDocument(starts)) {
    }
    const std::vector<YAML::Mark>& m = starts.marks;
    if (m.size() == 3 && m[1].pos == m[2].pos) {
      ConfigFail(origin + ": not valid YAML: " + Where(m[1]) + ": nothing can start here");
    }
    if (m.size() > 1) {
      ConfigFail(origin + ": holds more than one YAML document (the second begins at " +
                 Where(m[1]) + "); expected one");
    }
    return YAML::Load(text);  // the one document, now known to end
  } catch (const YAML::ParserException& e) {
    ConfigFail(origin + ": not valid YAML: " + Where(e.mark) + ": " + e.msg);
  } catch (const YAML::Exception& e) {
    ConfigFail(origin + ": not valid YAML: " + e.what());
  }
}

void ApplyOverride(const std::string& override_text, GivenKeys* given) {
  std::string origin = "--set '" + override_text + "'";
  size_t eq = override_text.find('=');
  if (eq == std::string::npos) ConfigFail(origin + ": expected key.path=value");
  std::string path = Trim(override_text.substr(0, eq));
  if (path.empty()) ConfigFail(origin + ": expected key.path=value (the key is empty)");
  YAML::Node value = ParseYaml(override_text.substr(eq + 1), origin);
  if (IsLeaf(path)) {
    SetGiven(given, path, value);
  } else if (IsSection(path) && !path.empty()) {
    if (value.IsNull()) return;
    if (!value.IsMap()) ConfigFail(path + " = " + Render(value) + ": " + SectionExpectation(path));
    FlattenInto(value, path, origin, given);
  } else {
    FailUnknownKey(path);
  }
}

void AnchorModelPaths(const std::string& base_dir, GivenKeys* given) {
  for (const char* key : {"model.plans", "model.path"}) {
    auto it = given->find(key);
    if (base_dir.empty() || it == given->end() || !it->second.IsScalar()) continue;
    const std::string path = it->second.Scalar();
    if (path.empty() || path[0] == '/') continue;
    given->erase(it);
    SetGiven(given, key, YAML::Node(base_dir + "/" + path));
  }
}

}  // namespace up
