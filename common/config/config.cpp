// Loading, validating and dumping the run configuration (see config.h).
//
// The YAML file and each `--set` override are flattened into one map from
// dotted key path ("train.lr") to the YAML node given for it; a later source
// replaces an earlier one key by key. Unknown keys, duplicate keys and
// sections that are not mappings fail while flattening. The map is then read
// onto a default Config in key order, each value checked for type and range
// as it is read, and the cross-field rules are checked last. The first
// problem found throws up::UsageError with one line:
//   config: <key.path> = <value as given>: <what is expected>[; <hint>]
// DumpConfig writes every key in a fixed order with strings double-quoted and
// doubles in their shortest exactly-round-tripping form, so its output is
// deterministic and loads back to an equal Config.
#include "common/config/config_file.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include "common/base/byte_size.h"
#include "common/base/errors.h"
#include "common/layout/model_geometry.h"
#include "common/layout/pipeline_layout.h"
#include "common/nnunet/nnunet_layout.h"

namespace up {
namespace {

using Given = std::map<std::string, YAML::Node>;

// Every leaf key, in dump order.
const std::vector<std::string>& LeafKeys() {
  static const std::vector<std::string> keys{
      "model.kind",
      "model.dims",
      "model.in_channels",
      "model.num_classes",
      "model.features",
      "model.norm",
      "model.groups",
      "model.regions",
      "model.regions_class_order",
      "model.plans",
      "model.configuration",
      "model.architecture",
      "model.path",
      "data.kind",
      "data.path",
      "data.size",
      "data.samples",
      "data.foreground_fraction",
      "data.augment",
      "data.validation",
      "data.workers",
      "data.dataset",
      "data.plans",
      "data.configuration",
      "data.fold",
      "data.preprocessed",
      "data.results",
      "data.cache",
      "train.batch_size",
      "train.micro_batches",
      "train.steps",
      "train.epochs",
      "train.lr",
      "train.optimizer",
      "train.momentum",
      "train.nesterov",
      "train.weight_decay",
      "train.lr_schedule",
      "train.steps_per_epoch",
      "train.poly_exponent",
      "train.preset",
      "train.warmup_steps",
      "train.grad_clip",
      "train.loss",
      "train.batch_dice",
      "train.deep_supervision",
      "train.precision",
      "train.loss_scale.init",
      "train.loss_scale.growth_interval",
      "train.memory_budget",
      "train.checkpointing",
      "train.offload",
      "train.seed",
      "train.threads",
      "checkpoint.every",
      "checkpoint.keep",
      "validate.every",
      "validate.overlap",
      "validate.nnunet",
      "pipeline.transport",
      "pipeline.activations",
      "pipeline.recompute_unit",
      "pipeline.offload",
      "pipeline.schedule",
      "pipeline.lock",
      "pipeline.park",
      "pipeline.prefetch",
      "pipeline.timeout_s",
      "pipeline.encoder_parts",
      "pipeline.decoder_parts",
      "pipeline.replicas",
      "pipeline.balance",
      "pipeline.cuts.encoder",
      "pipeline.cuts.decoder",
      "pipeline.placement",
      "pipeline.devices",
      "pipeline.nodes",
      "pipeline.stages.encoder.device",
      "pipeline.stages.encoder.node",
      "pipeline.stages.decoder.device",
      "pipeline.stages.decoder.node",
  };
  return keys;
}

// Every key whose value is a mapping of further keys ("" is the top level).
const std::vector<std::string>& SectionKeys() {
  static const std::vector<std::string> keys{
      "",
      "model",
      "data",
      "train",
      "train.loss_scale",
      "checkpoint",
      "validate",
      "pipeline",
      "pipeline.cuts",
      "pipeline.stages",
      "pipeline.stages.encoder",
      "pipeline.stages.decoder",
  };
  return keys;
}

bool Contains(const std::vector<std::string>& list, const std::string& s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

bool IsLeaf(const std::string& path) { return Contains(LeafKeys(), path); }
bool IsSection(const std::string& path) { return Contains(SectionKeys(), path); }

std::string Join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? sep : "") + parts[i];
  return out;
}

std::string ParentOf(const std::string& path) {
  size_t dot = path.rfind('.');
  return dot == std::string::npos ? "" : path.substr(0, dot);
}

std::string LastPart(const std::string& path) {
  size_t dot = path.rfind('.');
  return dot == std::string::npos ? path : path.substr(dot + 1);
}

// The names of the direct children of a section, in dump order.
std::vector<std::string> ChildrenOf(const std::string& section) {
  const std::string prefix = section.empty() ? "" : section + ".";
  std::vector<std::string> out;
  for (const auto& key : LeafKeys()) {
    if (key.compare(0, prefix.size(), prefix) != 0) continue;
    std::string child = key.substr(prefix.size(), key.find('.', prefix.size()) - prefix.size());
    if (!Contains(out, child)) out.push_back(child);
  }
  return out;
}

[[noreturn]] void Fail(const std::string& message) { throw UsageError("config: " + message); }

constexpr size_t kMaxConfigBytes = 1 << 20;

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
  std::vector<std::string> candidates = LeafKeys();
  for (const auto& key : SectionKeys()) {
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
  if (!suggestion.empty()) Fail(message + "; did you mean '" + suggestion + "'?");
  std::string parent = ParentOf(path);
  if (!IsSection(parent)) parent.clear();
  Fail(message + "; known keys " +
       (parent.empty() ? "at the top level" : "under '" + parent + "'") + ": " +
       Join(ChildrenOf(parent), ", "));
}

// ---------------------------------------------------------------------------
// Rendering values for messages and for the dump.

// `s` in double quotes with ", \ and control characters escaped; valid as a
// YAML double-quoted scalar.
std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

bool IsPlainScalar(const YAML::Node& node) { return node.IsScalar() && node.Tag() != "!"; }

bool LooksNumeric(const std::string& s) {
  if (s.empty()) return false;
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

// A node as the user wrote it: plain numbers bare, other scalars quoted,
// lists and mappings in flow style.
std::string Render(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
      return "null";
    case YAML::NodeType::Scalar:
      return IsPlainScalar(node) && LooksNumeric(node.Scalar()) ? node.Scalar()
                                                                : Quote(node.Scalar());
    case YAML::NodeType::Sequence: {
      std::vector<std::string> items;
      for (const auto& item : node) items.push_back(Render(item));
      return "[" + Join(items, ", ") + "]";
    }
    case YAML::NodeType::Map: {
      std::vector<std::string> items;
      for (const auto& kv : node) items.push_back(Render(kv.first) + ": " + Render(kv.second));
      return "{" + Join(items, ", ") + "}";
    }
    default:
      return "?";
  }
}

std::string IntList(const std::vector<int>& values) {
  std::vector<std::string> items;
  for (int v : values) items.push_back(std::to_string(v));
  return "[" + Join(items, ", ") + "]";
}

// The shortest "%.Ng" form that reads back to exactly `v`.
std::string FormatDouble(double v) {
  char buf[40];
  for (int precision = 15; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

// ---------------------------------------------------------------------------
// Flattening sources into the Given map.

void SetGiven(Given* given, const std::string& path, const YAML::Node& node) {
  given->erase(path);
  given->emplace(path, node);
}

std::string SectionExpectation(const std::string& section) {
  return "expected a mapping with keys " + Join(ChildrenOf(section), ", ");
}

// Adds every key of the mapping `node` (the section `prefix`) to `given`.
void Flatten(const YAML::Node& node, const std::string& prefix, const std::string& origin,
             Given* given) {
  std::set<std::string> seen;
  for (const auto& kv : node) {
    if (!kv.first.IsScalar()) {
      Fail(origin + ": key " + Render(kv.first) + " under '" + prefix + "' is not a plain name");
    }
    std::string path = (prefix.empty() ? "" : prefix + ".") + kv.first.Scalar();
    if (!seen.insert(path).second) Fail(origin + ": duplicate key '" + path + "'");
    if (IsLeaf(path)) {
      SetGiven(given, path, kv.second);
    } else if (IsSection(path)) {
      if (kv.second.IsNull()) continue;  // "model:" with nothing under it
      if (!kv.second.IsMap())
        Fail(path + " = " + Render(kv.second) + ": " + SectionExpectation(path));
      Flatten(kv.second, path, origin, given);
    } else {
      FailUnknownKey(path);
    }
  }
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
      Fail(origin + ": not valid YAML: line " + std::to_string(line) + ", column " +
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
      Fail(origin + ": not valid YAML: " + Where(m[1]) + ": nothing can start here");
    }
    if (m.size() > 1) {
      Fail(origin + ": holds more than one YAML document (the second begins at " + Where(m[1]) +
           "); expected one");
    }
    return YAML::Load(text);  // the one document, now known to end
  } catch (const YAML::ParserException& e) {
    Fail(origin + ": not valid YAML: " + Where(e.mark) + ": " + e.msg);
  } catch (const YAML::Exception& e) {
    Fail(origin + ": not valid YAML: " + e.what());
  }
}

void ApplyOverride(const std::string& override_text, Given* given) {
  std::string origin = "--set '" + override_text + "'";
  size_t eq = override_text.find('=');
  if (eq == std::string::npos) Fail(origin + ": expected key.path=value");
  std::string path = Trim(override_text.substr(0, eq));
  if (path.empty()) Fail(origin + ": expected key.path=value (the key is empty)");
  YAML::Node value = ParseYaml(override_text.substr(eq + 1), origin);
  if (IsLeaf(path)) {
    SetGiven(given, path, value);
  } else if (IsSection(path) && !path.empty()) {
    if (value.IsNull()) return;
    if (!value.IsMap()) Fail(path + " = " + Render(value) + ": " + SectionExpectation(path));
    Flatten(value, path, origin, given);
  } else {
    FailUnknownKey(path);
  }
}

// ---------------------------------------------------------------------------
// Reading the Given map onto a Config.

struct IntRange {
  long long lo;
  long long hi;  // INT_MAX: no upper bound
  std::string Text() const {
    if (hi == INT_MAX) return ">= " + std::to_string(lo);
    if (hi == lo + 1) return std::to_string(lo) + " or " + std::to_string(hi);
    return "in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  }
  bool Holds(long long v) const { return v >= lo && v <= hi; }
};

struct RealRange {
  double lo;
  bool lo_open;   // lo itself excluded
  bool has_hi;    // otherwise unbounded above
  double hi = 0;  // always excluded
  std::string Text() const {
    if (!has_hi) return (lo_open ? "> " : ">= ") + FormatDouble(lo);
    return std::string(lo_open ? "in (" : "in [") + FormatDouble(lo) + ", " + FormatDouble(hi) +
           ")";
  }
  bool Holds(double v) const { return (lo_open ? v > lo : v >= lo) && (!has_hi || v < hi); }
};

enum class Parsed { kOk, kBadType, kOverflow };

// A plain scalar holding a base-10 integer.
Parsed ParseInteger(const YAML::Node& node, long long* out) {
  if (!IsPlainScalar(node)) return Parsed::kBadType;
  const std::string& s = node.Scalar();
  if (s.empty() || std::isspace(static_cast<unsigned char>(s[0]))) return Parsed::kBadType;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (end != s.c_str() + s.size()) return Parsed::kBadType;
  if (errno == ERANGE) return Parsed::kOverflow;
  *out = v;
  return Parsed::kOk;
}

// A plain scalar holding a finite decimal number (integers included).
bool ParseReal(const YAML::Node& node, double* out) {
  if (!IsPlainScalar(node)) return false;
  const std::string& s = node.Scalar();
  if (s.empty() || s.find_first_of("xXnN") != std::string::npos) return false;  // hex, inf, nan
  if (std::isspace(static_cast<unsigned char>(s[0]))) return false;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

class Reader {
 public:
  explicit Reader(Given given) : given_(std::move(given)) {}

  bool Has(const std::string& path) const { return given_.count(path) != 0; }
  const YAML::Node& Node(const std::string& path) const { return given_.at(path); }

  // The value as the user gave it, or `fallback` (the current value) if not given.
  std::string Shown(const std::string& path, const std::string& fallback) const {
    return Has(path) ? Render(Node(path)) : fallback;
  }

  [[noreturn]] void FailAt(const std::string& path, const std::string& fallback,
                           const std::string& what) const {
    Fail(path + " = " + Shown(path, fallback) + ": " + what);
  }

  void Int(const std::string& path, int* field, IntRange range) const {
    if (!Has(path)) return;
    long long v = 0;
    Parsed p = ParseInteger(Node(path), &v);
    if (p == Parsed::kBadType) FailAt(path, "", "expected an integer (" + range.Text() + ")");
    if (p == Parsed::kOverflow || !range.Holds(v)) FailAt(path, "", "must be " + range.Text());
    *field = static_cast<int>(v);
  }

  void UInt64(const std::string& path, uint64_t* field) const {
    if (!Has(path)) return;
    const YAML::Node& node = Node(path);
    const std::string what = "expected an integer in [0, 18446744073709551615]";
    const std::string& s = node.Scalar();
    if (!IsPlainScalar(node) || s.empty() || !std::isdigit(static_cast<unsigned char>(s[0]))) {
      FailAt(path, "", what);
    }
    char* end = nullptr;
    errno = 0;
    unsigned long long v = std::strtoull(s.c_str(), &end, 10);
    if (end != s.c_str() + s.size() || errno == ERANGE) FailAt(path, "", what);
    *field = static_cast<uint64_t>(v);
  }

  // `null_is` (if given) is the value a YAML null stands for.
  void Real(const std::string& path, double* field, RealRange range,
            const double* null_is = nullptr) const {
    if (!Has(path)) return;
    if (null_is && Node(path).IsNull()) {
      *field = *null_is;
      return;
    }
    double v = 0;
    if (!ParseReal(Node(path), &v)) FailAt(path, "", "expected a number (" + range.Text() + ")");
    if (!range.Holds(v)) FailAt(path, "", "must be " + range.Text());
    *field = v;
  }

  void Enum(const std::string& path, std::string* field,
            const std::vector<std::string>& choices) const {
    if (!Has(path)) return;
    const YAML::Node& node = Node(path);
    if (!node.IsScalar() || !Contains(choices, node.Scalar())) {
      FailAt(path, "", "expected one of " + Join(choices, ", "));
    }
    *field = node.Scalar();
  }

  // A list of distinct `choices`, kept in the order of `choices`.
  void Subset(const std::string& path, std::vector<std::string>* field,
              const std::vector<std::string>& choices) const {
    if (!Has(path)) return;
    const YAML::Node& node = Node(path);
    const std::string what = "expected a list of some of " + Join(choices, ", ") + " ([] for none)";
    if (!node.IsSequence()) FailAt(path, "", what);
    std::vector<std::string> named;
    for (const auto& item : node) {
      if (!item.IsScalar() || !Contains(choices, item.Scalar())) {
        FailAt(path, "",
               (item.IsScalar() ? "'" + item.Scalar() + "' is not one; " : std::string()) + what);
      }
      if (Contains(named, item.Scalar()))
        FailAt(path, "", "'" + item.Scalar() + "' twice; " + what);
      named.push_back(item.Scalar());
    }
    field->clear();
    for (const std::string& c : choices)
      if (Contains(named, c)) field->push_back(c);
  }

  void Bool(const std::string& path, bool* field) const {
    if (!Has(path)) return;
    const YAML::Node& node = Node(path);
    const std::string v = node.IsScalar() ? node.Scalar() : "";
    if (v == "true" || v == "on") {
      *field = true;
    } else if (v == "false" || v == "off") {
      *field = false;
    } else {
      FailAt(path, "", "expected true or false (on or off)");
    }
  }

  // A size with a unit ("16GiB") or a number of bytes; null means none (0).
  void ByteSize(const std::string& path, int64_t* field) const {
    if (!Has(path)) return;
    const YAML::Node& node = Node(path);
    if (node.IsNull()) {
      *field = 0;
      return;
    }
    if (!node.IsScalar()) FailAt(path, "", "expected a size like 16GiB or a number of bytes");
    try {
      *field = ParseByteSize(node.Scalar(), path);
    } catch (const UsageError& e) {
      Fail(e.what());
    }
  }

  // Any string; null means empty.
  void String(const std::string& path, std::string* field) const {
    if (!Has(path)) return;
    const YAML::Node& node = Node(path);
    if (node.IsNull()) {
      field->clear();
      return;
    }
    if (!node.IsScalar()) FailAt(path, "", "expected a string");
    *field = node.Scalar();
  }

  static bool IsDeviceName(const YAML::Node& node) {
    if (!node.IsScalar()) return false;
    const std::string& s = node.Scalar();
    if (s == "auto" || s == "cpu" || s == "cuda") return true;
    if (s.compare(0, 5, "cuda:") != 0) return false;
    const std::string index = s.substr(5);
    return !index.empty() && index.size() <= 4 &&
           std::all_of(index.begin(), index.end(),
                       [](unsigned char c) { return std::isdigit(c) != 0; });
  }

  void Device(const std::string& path, std::string* field) const {
    if (!Has(path)) return;
    if (!IsDeviceName(Node(path)))
      FailAt(path, "", "expected auto, cpu, cuda or cuda:N (N a device index)");
    *field = Node(path).Scalar();
  }

  // A list of devices, one per stage ([] or null: none).
  void DeviceSeq(const std::string& path, std::vector<std::string>* field) const {
    if (!Has(path)) return;
    const YAML::Node& node = Node(path);
    const std::string what =
        "expected a list of devices (auto, cpu, cuda or cuda:N), one per stage";
    if (node.IsNull()) {
      field->clear();
      return;
    }
    if (!node.IsSequence()) FailAt(path, "", what);
    std::vector<std::string> values;
    for (const auto& item : node) {
      if (!IsDeviceName(item)) FailAt(path, "", what);
      values.push_back(item.Scalar());
    }
    *field = std::move(values);
  }

  // A list of `min_count`..`max_count` integers each >= `min_value`.
  void IntSeq(const std::string& path, std::vector<int>* field, size_t min_count, size_t max_count,
              int min_value) const {
    if (!Has(path)) return;
    const YAML::Node& node = Node(path);
    const std::string what = "expected a list of " + std::to_string(min_count) + " to " +
                             std::to_string(max_count) + " integers";
    if (!node.IsSequence()) FailAt(path, "", what);
    std::vector<int> values;
    for (const auto& item : node) {
      long long v = 0;
      Parsed p = ParseInteger(item, &v);
      if (p == Parsed::kBadType) FailAt(path, "", what);
      if (p == Parsed::kOverflow || v < min_value || v > INT_MAX) {
        FailAt(path, "", "every entry must be an integer >= " + std::to_string(min_value));
      }
      values.push_back(static_cast<int>(v));
    }
    if (values.size() < min_count || values.size() > max_count) {
      FailAt(path, "",
             "must have " + std::to_string(min_count) + " to " + std::to_string(max_count) +
                 " entries (has " + std::to_string(values.size()) + ")");
    }
    *field = std::move(values);
  }

  // data.size: one integer for every axis, or exactly `dims` integers.
  void SpatialSize(const std::string& path, std::vector<int>* field, int dims) const {
    if (!Has(path)) {
      // Not given: the default size on every axis.
      if (field->size() != static_cast<size_t>(dims))
        field->assign(static_cast<size_t>(dims), field->empty() ? 64 : field->front());
      return;
    }
    const YAML::Node& node = Node(path);
    const std::string d = std::to_string(dims);
    const std::string what =
        "expected an integer (all axes) or a list of " + d + " integers (model.dims = " + d + ")";
    const std::string entry_rule = "each spatial size must be an integer >= 1";
    long long v = 0;
    std::vector<int> values;
    if (node.IsSequence()) {
      for (const auto& item : node) {
        Parsed p = ParseInteger(item, &v);
        if (p == Parsed::kBadType) FailAt(path, "", what);
        if (p == Parsed::kOverflow || v < 1 || v > INT_MAX) FailAt(path, "", entry_rule);
        values.push_back(static_cast<int>(v));
      }
      if (values.size() != static_cast<size_t>(dims)) {
        FailAt(path, "",
               "must have model.dims = " + d + " entries (has " + std::to_string(values.size()) +
                   "), or be one integer for all axes");
      }
    } else {
      Parsed p = ParseInteger(node, &v);
      if (p == Parsed::kBadType) FailAt(path, "", what);
      if (p == Parsed::kOverflow || v < 1 || v > INT_MAX) FailAt(path, "", entry_rule);
      values.assign(static_cast<size_t>(dims), static_cast<int>(v));
    }
    *field = std::move(values);
  }

 private:
  Given given_;
};

// "nearest valid: a or b" for the multiples of `step` around `value`.
std::string NearestMultiples(long long value, long long step) {
  long long below = value / step * step;
  long long above = below + step;
  if (below < 1) return "nearest valid: " + std::to_string(above);
  return "nearest valid: " + std::to_string(below) + " or " + std::to_string(above);
}

// "nearest valid: a or b" for the divisors of `n` around `value`.
std::string NearestDivisors(long long value, long long n) {
  long long below = 0;
  long long above = 0;
  auto consider = [&](long long d) {
    if (d <= value && d > below) below = d;
    if (d >= value && (above == 0 || d < above)) above = d;
  };
  for (long long d = 1; d * d <= n; ++d) {
    if (n % d != 0) continue;
    consider(d);
    consider(n / d);
  }
  if (above == 0) return "nearest valid: " + std::to_string(below);
  return "nearest valid: " + std::to_string(below) + " or " + std::to_string(above);
}

const IntRange kAtLeast0{0, INT_MAX};
const IntRange kAtLeast1{1, INT_MAX};

// The keys only one model kind reads.
const std::vector<std::string> kClassicOnly{"model.features", "model.norm", "model.groups"};
const std::vector<std::string> kNnunetOnly{"model.plans", "model.configuration",
                                           "model.architecture"};
const std::vector<std::string> kTorchscriptOnly{"model.path"};

// torchscript: the bundle fixes dims, channels and classes; a config may
// repeat them but not contradict them.
void PinToBundle(const Reader& r, const std::string& key, int* field, int bundle_value,
                 const std::string& what) {
  if (r.Has(key)) {
    r.Int(key, field, {INT_MIN, INT_MAX});
    if (*field != bundle_value)
      r.FailAt(key, "",
               what + " (model.path's manifest.json); leave it out or set it to " +
                   std::to_string(bundle_value));
  }
  *field = bundle_value;
}

void ReadTorchscriptModel(const Reader& r, Config* c) {
  ModelConfig* m = &c->model;
  r.String("model.path", &m->path);
  m->bundle = ReadTorchscriptBundle(m->path);
  m->path = m->bundle.dir;
  const TorchscriptBundle& b = m->bundle;
  PinToBundle(r, "model.dims", &m->dims, b.dims, "the bundle is " + std::to_string(b.dims) + "-D");
  PinToBundle(r, "model.in_channels", &m->in_channels, b.in_channels,
              "the bundle's first level takes " + std::to_string(b.in_channels) + " channels");
  PinToBundle(r, "model.num_classes", &m->num_classes, b.num_classes,
              "the bundle's heads give " + std::to_string(b.num_classes) + " classes");
  // The example's patch is the default; any multiple of the downsampling works.
  c->data.size.assign(m->bundle.example.begin() + 2, m->bundle.example.end());
}

// Reads model.*; for nnunet also the plan, whose patch and batch sizes become
// the defaults of data.size, train.batch_size and train.batch_dice; for
// torchscript the bundle's manifest.
void ReadModel(const Reader& r, Config* c) {
  ModelConfig* m = &c->model;
  r.Enum("model.kind", &m->kind, {"classic", "nnunet", "torchscript"});
  for (const auto& [kind, keys] :
       {std::pair{"classic", &kClassicOnly}, std::pair{"nnunet", &kNnunetOnly},
        std::pair{"torchscript", &kTorchscriptOnly}}) {
    if (m->kind == kind) continue;
    for (const auto& key : *keys) {
      if (r.Has(key))
        r.FailAt(key, "",
                 std::string("applies only to model.kind = ") + kind + " (model.kind is " +
                     m->kind + ")");
    }
  }
  if (m->kind == "torchscript") {
    ReadTorchscriptModel(r, c);
    return;
  }
  r.Int("model.in_channels", &m->in_channels, kAtLeast1);
  r.Int("model.num_classes", &m->num_classes, {1, INT_MAX});  // >= 2 without regions
  if (m->kind == "classic") {
    r.Int("model.dims", &m->dims, {2, 3});
    r.IntSeq("model.features", &m->features, 1, 8, 1);
    r.Enum("model.norm", &m->norm, {"batch", "group", "instance"});
    r.Int("model.groups", &m->groups, kAtLeast1);
    return;
  }
  r.String("model.plans", &m->plans);
  r.String("model.configuration", &m->configuration);
  const bool has_arch = r.Has("model.architecture") && !r.Node("model.architecture").IsNull();
  if (m->plans.empty() == !has_arch) {
    r.FailAt("model.plans", Quote(m->plans),
             m->plans.empty() ? "model.kind = nnunet needs model.plans (an nnU-Net plans JSON) and "
                                "model.configuration (e.g. 3d_fullres)"
                              : "give model.plans or model.architecture, not both");
  }
  if (has_arch) {
    m->nnunet = ParseNnunetArchitecture(r.Node("model.architecture"), "model.architecture");
  } else {
    const NnunetPlan plan = ReadNnunetPlan(m->plans, m->configuration);
    m->nnunet = plan.architecture;
    c->data.size = plan.patch_size;
    c->train.batch_size = plan.batch_size;
    c->train.batch_dice = plan.batch_dice;
    // The plan's batch may not split into the default micro-batches.
    if (c->train.batch_size % c->train.micro_batches != 0) c->train.micro_batches = 1;
  }
  if (r.Has("model.dims")) {
    r.Int("model.dims", &m->dims, {2, 3});
    if (m->dims != m->nnunet.dims)
      r.FailAt("model.dims", "",
               "the nnU-Net architecture is " + std::to_string(m->nnunet.dims) +
                   "-D (its conv_op); leave model.dims out or set it to " +
                   std::to_string(m->nnunet.dims));
  }
  m->dims = m->nnunet.dims;
  c->train.deep_supervision = true;  // as nnU-Net trains,
  c->train.loss = "ce_dice";         // with its Dice + CE (DC_and_CE_loss)
}

const std::vector<std::string> kDataKinds{"synthetic", "folder", "nifti", "cache", "nnunet"};
const std::vector<std::string> kNnunetDataOnly{
    "data.dataset",      "data.plans",   "data.configuration", "data.fold",
    "data.preprocessed", "data.results", "data.cache"};

std::string AbsolutePath(const std::string& path) {
  if (path.empty()) return path;
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::absolute(path, ec);
  return ec ? path : p.lexically_normal().string();
}

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

// data.kind = nnunet, read before the model: the dataset's plans become
// model.plans (and model.kind nnunet), its channels and labels the defaults
// of model.in_channels and model.num_classes. Names resolve to paths here, so
// the dump (which every stage loads) holds the paths.
// Returns the dataset (nullopt for other kinds) for CheckNnunetModel.
std::optional<NnunetDataset> ReadNnunetData(const Reader& r, Config* c) {
  DataConfig* d = &c->data;
  r.Enum("data.kind", &d->kind, kDataKinds);
  if (d->kind != "nnunet") {
    for (const auto& key : kNnunetDataOnly)
      if (r.Has(key))
        r.FailAt(key, "", "applies only to data.kind = nnunet (data.kind is " + d->kind + ")");
    return std::nullopt;
  }
  if (r.Has("data.path")) {
    r.FailAt("data.path", "",
             "data.kind = nnunet reads data.dataset (Dataset001_Sample, its number, or the "
             "preprocessed dataset's folder); drop data.path");
  }
  if (r.Has("data.validation")) {
    r.FailAt("data.validation", "",
             "data.kind = nnunet holds out data.fold's validation cases (splits_final.json); "
             "drop data.validation");
  }
  r.String("data.dataset", &d->dataset);
  r.String("data.plans", &d->plans);
  r.String("data.configuration", &d->configuration);
  d->preprocessed = EnvOr("nnUNet_preprocessed", "");
  d->results = EnvOr("nnUNet_results", "");
  r.String("data.preprocessed", &d->preprocessed);
  r.String("data.results", &d->results);
  r.String("data.cache", &d->cache);
  if (r.Has("data.fold")) {
    const YAML::Node& n = r.Node("data.fold");
    const std::string v = n.IsScalar() ? n.Scalar() : "";
    const bool digits = !v.empty() && v.size() < 4 &&
                        std::all_of(v.begin(), v.end(), [](char ch) { return std::isdigit(ch); });
    if (v != "all" && !(digits && std::stoi(v) <= 4))
      r.FailAt("data.fold", "", "expected a fold 0..4 (nnU-Net's 5-fold split) or all");
    d->fold = digits ? std::to_string(std::stoi(v)) : v;
  }
  NnunetDataset ds;
  try {
    ds = FindNnunetDataset(d->dataset, d->preprocessed, d->plans, d->configuration);
  } catch (const UsageError& e) {
    Fail(e.what());
  }
  d->dataset = ds.dir;
  d->preprocessed = ds.preprocessed;
  d->results = AbsolutePath(d->results);
  d->cache = d->cache.empty() ? ds.data_dir + ".unet-pipeline" : AbsolutePath(d->cache);

  ModelConfig* m = &c->model;
  if (!r.Has("model.kind")) m->kind = "nnunet";
  if (m->kind == "nnunet" && !r.Has("model.plans") && !r.Has("model.architecture"))
    m->plans = ds.plans_file;
  if (!r.Has("model.configuration")) m->configuration = d->configuration;
  m->in_channels = static_cast<int>(ds.channel_names.size());
  m->num_classes = ds.outputs();
  return ds;
}

// After the model: what it takes and predicts is what the dataset holds.
void CheckNnunetModel(const Reader& r, const Config& c, const std::optional<NnunetDataset>& found) {
  if (!found) return;
  const NnunetDataset& ds = *found;
  const int channels = static_cast<int>(ds.channel_names.size());
  const int classes = ds.outputs();
  if (c.model.in_channels != channels)
    r.FailAt("model.in_channels", "",
             ds.name + "'s dataset.json has " + std::to_string(channels) +
                 " channel(s); leave model.in_channels out or set it to " +
                 std::to_string(channels));
  if (c.model.num_classes != classes)
    r.FailAt("model.num_classes", "",
             ds.name + "'s dataset.json has " + std::to_string(classes) +
                 (ds.regions.empty() ? " labels" : " regions") +
                 "; leave model.num_classes out or set it to " + std::to_string(classes));
}

// model.regions and model.regions_class_order (an nnunet dataset's own unless
// given).
void ReadRegions(const Reader& r, const std::optional<NnunetDataset>& found, ModelConfig* m) {
  if (found && !r.Has("model.regions")) {
    m->regions = found->regions;
    m->regions_class_order = found->regions_class_order;
  }
  if (r.Has("model.regions")) {
    const YAML::Node& node = r.Node("model.regions");
    const std::string what =
        "expected a list of regions, each a list of the classes 1..255 it holds (e.g. [[1, 2, "
        "3], [2, 3], [3]])";
    m->regions.clear();
    if (!node.IsSequence() && !node.IsNull()) r.FailAt("model.regions", "", what);
    for (const auto& region : node) {
      if (!region.IsSequence() || region.size() == 0) r.FailAt("model.regions", "", what);
      std::vector<int> members;
      for (const auto& v : region) {
        long long x = 0;
        if (ParseInteger(v, &x) != Parsed::kOk || x < 1 || x > 255)
          r.FailAt("model.regions", "", what);
        members.push_back(static_cast<int>(x));
      }
      m->regions.push_back(members);
    }
  }
  r.IntSeq("model.regions_class_order", &m->regions_class_order, 0, 255, 1);
  const size_t n = m->regions.size();
  if (n == 0 && m->num_classes < 2) {
    r.FailAt("model.num_classes", std::to_string(m->num_classes),
             "must be >= 2 (class 0 is the background; a single output needs model.regions)");
  }
  if (n == 0) {
    if (!m->regions_class_order.empty())
      r.FailAt("model.regions_class_order", IntList(m->regions_class_order),
               "applies only with model.regions");
    return;
  }
  if (m->regions_class_order.size() != n) {
    r.FailAt("model.regions_class_order", IntList(m->regions_class_order),
             "needs one class per region of model.regions (" + std::to_string(n) + ")");
  }
  if (m->num_classes != static_cast<int>(n)) {
    r.FailAt(
        "model.num_classes", std::to_string(m->num_classes),
        "with model.regions the network has one output per region; set it to " + std::to_string(n));
  }
}

void ReadData(const Reader& r, int dims, DataConfig* d) {
  r.Enum("data.kind", &d->kind, kDataKinds);
  r.String("data.path", &d->path);
  r.SpatialSize("data.size", &d->size, dims);
  r.Int("data.samples", &d->samples, kAtLeast1);
  r.Real("data.foreground_fraction", &d->foreground_fraction, {0.0, false, false});
  if (d->foreground_fraction > 1) {
    r.FailAt("data.foreground_fraction", FormatDouble(d->foreground_fraction),
             "must be in [0, 1]: the share of patches centred on a foreground voxel (nnU-Net: "
             "0.33)");
  }
  if (r.Has("data.augment")) {
    r.Subset("data.augment", &d->augment, AugmentationNames());
  } else if (d->kind == "nifti" || d->kind == "cache") {
    d->augment = AugmentationNames();
  } else if (d->kind == "nnunet") {
    // nnU-Net's own (nnUNetTrainer.get_training_transforms): no quarter turns.
    d->augment = {"scale",      "rotate",   "mirror", "noise",          "blur",
                  "brightness", "contrast", "lowres", "gamma_inverted", "gamma"};
  }
  r.Int("data.workers", &d->workers, {0, 64});
  if (r.Has("data.validation")) {
    const YAML::Node& node = r.Node("data.validation");
    const std::string what =
        "expected a share of the cases in [0, 1) (nnU-Net's folds: 0.2) or a list of case names";
    if (node.IsSequence()) {
      d->validation_cases.clear();
      for (const auto& item : node) {
        if (!item.IsScalar() || item.Scalar().empty()) r.FailAt("data.validation", "", what);
        d->validation_cases.push_back(item.Scalar());
      }
      d->validation = 0;
    } else if (node.IsNull()) {
      d->validation = 0;
      d->validation_cases.clear();
    } else {
      r.Real("data.validation", &d->validation, {0.0, false, true, 1.0});
      d->validation_cases.clear();
    }
  }
}

void ReadValidate(const Reader& r, ValidateConfig* v) {
  r.Int("validate.every", &v->every, kAtLeast0);
  r.Real("validate.overlap", &v->overlap, {0.0, false, true, 1.0});
  r.Enum("validate.nnunet", &v->nnunet, {"on", "off", "npz"});
}

// train.preset = nnunet: nnUNetTrainer's recipe (nnunetv2 2.x) as defaults.
void ApplyNnunetPreset(const std::string& model_kind, TrainConfig* t) {
  t->optimizer = "sgd";
  t->lr = 1e-2;
  t->momentum = 0.99;
  t->nesterov = true;
  t->weight_decay = 3e-5;
  t->lr_schedule = "poly";
  t->poly_exponent = 0.9;
  t->steps_per_epoch = 250;  // num_iterations_per_epoch
  t->steps = 1000 * 250;     // num_epochs
  t->grad_clip = 12;
  t->micro_batches = 1;  // the plan's batch in one step, Dice over it as nnU-Net's
  t->loss = "ce_dice";
  if (model_kind == "nnunet") t->deep_supervision = true;
}

void ReadTrain(const Reader& r, const std::string& data_kind, const std::string& model_kind,
               TrainConfig* t) {
  const double zero = 0.0;
  t->preset = data_kind == "nnunet" ? "nnunet" : "none";
  r.Enum("train.preset", &t->preset, {"none", "nnunet"});
  if (t->preset == "nnunet") ApplyNnunetPreset(model_kind, t);
  r.Int("train.batch_size", &t->batch_size, kAtLeast1);
  r.Int("train.micro_batches", &t->micro_batches, kAtLeast1);
  r.Int("train.steps", &t->steps, kAtLeast1);
  r.Real("train.lr", &t->lr, {0.0, true, false});
  r.Enum("train.optimizer", &t->optimizer, {"adam", "sgd"});
  r.Real("train.momentum", &t->momentum, {0.0, false, true, 1.0});
  r.Bool("train.nesterov", &t->nesterov);
  r.Real("train.weight_decay", &t->weight_decay, {0.0, false, false});
  r.Enum("train.lr_schedule", &t->lr_schedule, {"constant", "cosine", "poly"});
  r.Int("train.steps_per_epoch", &t->steps_per_epoch, kAtLeast0);
  r.Real("train.poly_exponent", &t->poly_exponent, {0.0, false, false});
  if (r.Has("train.epochs")) {
    int epochs = 0;
    r.Int("train.epochs", &epochs, kAtLeast1);
    if (r.Has("train.steps"))
      r.FailAt("train.epochs", "", "give train.epochs or train.steps, not both");
    const int64_t steps = static_cast<int64_t>(epochs) * std::max(1, t->steps_per_epoch);
    if (steps > INT_MAX)
      r.FailAt("train.epochs", "", "makes more than " + std::to_string(INT_MAX) + " steps");
    t->steps = static_cast<int>(steps);
  }
  if (t->nesterov && (t->optimizer != "sgd" || t->momentum <= 0))
    r.FailAt("train.nesterov", "true",
             "needs train.optimizer = sgd with train.momentum > 0 (nnU-Net: 0.99)");
  r.Int("train.warmup_steps", &t->warmup_steps, kAtLeast0);
  r.Real("train.grad_clip", &t->grad_clip, {0.0, false, false}, &zero);
  r.Enum("train.loss", &t->loss, {"ce", "ce_dice"});
  r.Bool("train.batch_dice", &t->batch_dice);
  r.Bool("train.deep_supervision", &t->deep_supervision);
  r.Enum("train.precision", &t->precision, {"fp32", "bf16", "fp16"});
  r.Real("train.loss_scale.init", &t->loss_scale_init, {0.0, true, false});
  r.Int("train.loss_scale.growth_interval", &t->loss_scale_growth_interval, kAtLeast1);
  r.ByteSize("train.memory_budget", &t->memory_budget);
  r.Enum("train.checkpointing", &t->checkpointing, {"off", "levels", "blocks"});
  r.Enum("train.offload", &t->offload, {"off", "on"});
  r.UInt64("train.seed", &t->seed);
  r.Int("train.threads", &t->threads, {1, 256});
}

void ReadCheckpoint(const Reader& r, CheckpointConfig* c) {
  r.Int("checkpoint.every", &c->every, kAtLeast0);
  r.Int("checkpoint.keep", &c->keep, kAtLeast1);
}

void ReadPipeline(const Reader& r, PipelineConfig* p) {
  r.Enum("pipeline.transport", &p->transport, {"shm", "cuda_ipc", "gloo", "nccl"});
  r.Enum("pipeline.activations", &p->activations, {"keep", "recompute"});
  r.Enum("pipeline.recompute_unit", &p->recompute_unit, {"level", "block"});
  r.Enum("pipeline.offload", &p->offload, {"off", "on"});
  r.Enum("pipeline.schedule", &p->schedule, {"sequential", "gpipe", "1f1b"});
  r.Enum("pipeline.lock", &p->lock, {"auto", "on", "off"});
  r.Enum("pipeline.park", &p->park, {"auto", "always", "never"});
  r.Enum("pipeline.prefetch", &p->prefetch, {"off", "on"});
  r.Real("pipeline.timeout_s", &p->timeout_s, {0.0, true, false});
  r.Device("pipeline.stages.encoder.device", &p->encoder.device);
  r.Int("pipeline.stages.encoder.node", &p->encoder.node, kAtLeast0);
  r.Device("pipeline.stages.decoder.device", &p->decoder.device);
  r.Int("pipeline.stages.decoder.node", &p->decoder.node, kAtLeast0);
  r.Int("pipeline.encoder_parts", &p->encoder_parts, {1, 64});
  r.Int("pipeline.decoder_parts", &p->decoder_parts, {1, 64});
  r.Int("pipeline.replicas", &p->replicas, {1, 64});
  r.Enum("pipeline.balance", &p->balance, {"memory", "time"});
  r.IntSeq("pipeline.cuts.encoder", &p->encoder_cuts, 0, 63, 1);
  r.IntSeq("pipeline.cuts.decoder", &p->decoder_cuts, 0, 63, 1);
  r.Enum("pipeline.placement", &p->placement, {"listed", "mirrored"});
  r.DeviceSeq("pipeline.devices", &p->devices);
  r.IntSeq("pipeline.nodes", &p->nodes, 0, 128, 0);
  // Parts not given: as many as the cuts make.
  const struct {
    const char* parts_key;
    const char* cuts_key;
    int* parts;
    const std::vector<int>* cuts;
  } halves[] = {
      {"pipeline.encoder_parts", "pipeline.cuts.encoder", &p->encoder_parts, &p->encoder_cuts},
      {"pipeline.decoder_parts", "pipeline.cuts.decoder", &p->decoder_parts, &p->decoder_cuts}};
  for (const auto& h : halves) {
    const int from_cuts = static_cast<int>(h.cuts->size()) + 1;
    if (*h.parts == 0) {
      *h.parts = from_cuts;
    } else if (!h.cuts->empty() && *h.parts != from_cuts) {
      r.FailAt(h.cuts_key, "",
               "makes " + std::to_string(from_cuts) + " parts, but " + h.parts_key + " is " +
                   std::to_string(*h.parts) + "; give one cut fewer than parts, or leave " +
                   h.parts_key + " out");
    }
  }
}

// The rules that tie several keys together.
void CheckConsistency(const Reader& r, const Config& c) {
  const ModelConfig& m = c.model;
  for (const char* key : {"validate.every", "validate.overlap"}) {
    if (r.Has(key) && !c.data.HasValidation()) {
      r.FailAt(key, "",
               "there is no validation without data.validation; set it to a share of the cases "
               "(0.2) or a list of case names");
    }
  }
  if (r.Has("validate.nnunet") && (c.data.kind != "nnunet" || c.data.fold == "all")) {
    r.FailAt(
        "validate.nnunet", Quote(c.validate.nnunet),
        c.data.kind != "nnunet"
            ? "nnU-Net's validation folder is for data.kind: nnunet; drop the key"
            : "data.fold: all holds out no cases to validate; give a fold 0..4 or drop the key");
  }
  if (m.norm == "group") {
    long long g = 2LL * m.features.back();
    for (int f : m.features) g = std::gcd(g, static_cast<long long>(f));
    if (g % m.groups != 0) {
      r.FailAt("model.groups", std::to_string(m.groups),
               "must divide every model.features entry " + IntList(m.features) + " and 2*" +
                   std::to_string(m.features.back()) + " when model.norm = group; " +
                   NearestDivisors(m.groups, g));
    }
  }

  if (c.data.kind != "synthetic" && c.data.kind != "nnunet" && c.data.path.empty()) {
    r.FailAt("data.path", Quote(c.data.path),
             "must name the dataset root when data.kind = " + c.data.kind);
  }
  if (c.data.kind == "folder" && m.dims != 2) {
    r.FailAt("model.dims", std::to_string(m.dims),
             "must be 2 when data.kind = folder (PNG images are 2-D); use data.kind = nifti for "
             "3-D volumes");
  }
  if (c.data.kind == "nifti") {
    // BraTS: four modalities in, labels 0, 1, 2, 4 out (classes 0..3);
    // model.dims 2 trains on slices of the volumes.
    if (m.in_channels != 4) {
      r.FailAt("model.in_channels", std::to_string(m.in_channels),
               "must be 4 when data.kind = nifti (flair, t1, t1ce, t2)");
    }
    if (m.regions.empty() && m.num_classes != 4) {
      r.FailAt("model.num_classes", std::to_string(m.num_classes),
               "must be 4 when data.kind = nifti (BraTS labels 0, 1, 2, 4 become classes 0..3)");
    }
    if (!m.regions.empty() && MaskClasses(m) != 4) {
      r.FailAt("model.regions", "",
               "must name classes up to 3 when data.kind = nifti (BraTS labels 0, 1, 2, 4 become "
               "classes 0..3; whole tumour, core, enhancing: [[1, 2, 3], [1, 3], [3]])");
    }
  }
  if (m.kind != "classic") {
    const std::vector<int> total = PatchMultiple(m);
    for (size_t d = 0; d < c.data.size.size(); ++d) {
      if (c.data.size[d] % total[d] != 0) {
        r.FailAt("data.size", IntList(c.data.size),
                 "axis " + std::to_string(d) + " must be divisible by " + std::to_string(total[d]) +
                     (m.kind == "nnunet" ? ", the product of the architecture's strides on it; "
                                         : ", the bundle's downsampling on it; ") +
                     NearestMultiples(c.data.size[d], total[d]));
      }
    }
  }
  if (c.train.deep_supervision && m.kind == "classic") {
    r.FailAt("train.deep_supervision", "true",
             "needs model.kind = nnunet or torchscript (the classic U-Net has one head); set it "
             "to false");
  }
  if (c.train.deep_supervision && m.kind == "torchscript" &&
      static_cast<int>(m.bundle.heads.size()) != m.bundle.levels()) {
    std::string have;
    for (const BundleLevel& h : m.bundle.heads)
      have += (have.empty() ? "" : ", ") + std::to_string(h.level);
    r.FailAt("train.deep_supervision", "true",
             "needs a head at every decoder level 0.." + std::to_string(m.bundle.levels() - 1) +
                 "; the bundle has heads at " + have +
                 "; export the model with its deep-supervision heads, or set it to false");
  }
  if (m.kind == "classic") {
    const int factor = 1 << static_cast<int>(m.features.size());
    for (int s : c.data.size) {
      if (s % factor != 0) {
        r.FailAt("data.size", IntList(c.data.size),
                 "each spatial size must be divisible by 2^levels = " + std::to_string(factor) +
                     " (model.features has " + std::to_string(m.features.size()) + " levels); " +
                     NearestMultiples(s, factor));
      }
    }
  }

  const TrainConfig& t = c.train;
  if (t.micro_batches > t.batch_size) {
    r.FailAt("train.micro_batches", std::to_string(t.micro_batches),
             "must be <= train.batch_size (" + std::to_string(t.batch_size) + ")");
  }
  if (t.batch_size % t.micro_batches != 0) {
    r.FailAt("train.batch_size", std::to_string(t.batch_size),
             "must be divisible by train.micro_batches (" + std::to_string(t.micro_batches) +
                 "); " + NearestMultiples(t.batch_size, t.micro_batches));
  }
  const int shards = t.micro_batches * c.pipeline.replicas;  // micro-batches of a whole batch
  if (c.pipeline.replicas > 1 && t.batch_size % shards != 0) {
    r.FailAt("train.batch_size", std::to_string(t.batch_size),
             "must be divisible by pipeline.replicas x train.micro_batches (" +
                 std::to_string(c.pipeline.replicas) + " x " + std::to_string(t.micro_batches) +
                 " = " + std::to_string(shards) + "); " + NearestMultiples(t.batch_size, shards));
  }
  if (t.warmup_steps >= t.steps) {
    r.FailAt("train.warmup_steps", std::to_string(t.warmup_steps),
             "must be < train.steps (" + std::to_string(t.steps) + ")");
  }

  const PipelineConfig& p = c.pipeline;
  if (p.lock == "on" && p.schedule != "sequential") {
    r.FailAt("pipeline.lock", Quote(p.lock),
             "cannot be on with pipeline.schedule = " + p.schedule +
                 " (overlapped schedules need the lock off or stages on different devices); "
                 "set pipeline.lock to auto or off, or pipeline.schedule to sequential");
  }
  // Blocks inside a level: the classic U-Net's conv-norm-ReLU and nnU-Net's
  // conv blocks and residual blocks; a TorchScript bundle's level is one file.
  if (m.kind == "torchscript") {
    if (t.checkpointing == "blocks") {
      r.FailAt("train.checkpointing", Quote(t.checkpointing),
               "needs blocks inside the levels, and a torchscript bundle's level is one opaque "
               "module; use levels");
    }
    if (p.recompute_unit == "block") {
      r.FailAt("pipeline.recompute_unit", Quote(p.recompute_unit),
               "needs blocks inside the levels, and a torchscript bundle's level is one opaque "
               "module; use level");
    }
  }
  if (p.recompute_unit != "level" && p.activations != "recompute") {
    r.FailAt("pipeline.recompute_unit", Quote(p.recompute_unit),
             "applies only with pipeline.activations = recompute (keep recomputes nothing); set "
             "pipeline.activations to recompute");
  }
  if (t.offload == "on" && t.checkpointing == "off") {
    r.FailAt("train.offload", Quote(t.offload),
             "parks what checkpointing keeps (each unit's input), and without it autograd keeps "
             "every activation itself; set train.checkpointing to levels or blocks");
  }
  if (p.offload == "on" && p.activations != "recompute") {
    r.FailAt("pipeline.offload", Quote(p.offload),
             "parks what recompute keeps (each unit's input), and with keep autograd holds every "
             "saved tensor itself; set pipeline.activations to recompute");
  }
  // The parts, cuts and placement lists against the model's levels.
  ResolveLayout(c);
}

// A relative model.plans or model.path in a config file names a file beside
// that config.
void AnchorModelPaths(const std::string& base_dir, Given* given) {
  for (const char* key : {"model.plans", "model.path"}) {
    auto it = given->find(key);
    if (base_dir.empty() || it == given->end() || !it->second.IsScalar()) continue;
    const std::string path = it->second.Scalar();
    if (path.empty() || path[0] == '/') continue;
    given->erase(it);
    SetGiven(given, key, YAML::Node(base_dir + "/" + path));
  }
}

Config Resolve(const YAML::Node* root, const std::string& origin, const std::string& base_dir,
               const std::vector<std::string>& overrides) {
  Given given;
  if (root) Flatten(*root, "", origin, &given);
  AnchorModelPaths(base_dir, &given);
  for (const auto& o : overrides) ApplyOverride(o, &given);

  Reader reader(std::move(given));
  Config c;
  const std::optional<NnunetDataset> nnunet_data = ReadNnunetData(reader, &c);
  ReadModel(reader, &c);
  CheckNnunetModel(reader, c, nnunet_data);
  ReadRegions(reader, nnunet_data, &c.model);
  ReadData(reader, c.model.dims, &c.data);
  ReadTrain(reader, c.data.kind, c.model.kind, &c.train);
  ReadCheckpoint(reader, &c.checkpoint);
  ReadValidate(reader, &c.validate);
  ReadPipeline(reader, &c.pipeline);
  CheckConsistency(reader, c);
  return c;
}

}  // namespace

Config LoadConfigFromString(const std::string& yaml_text, const std::string& origin,
                            const std::vector<std::string>& overrides,
                            const std::string& base_dir) {
  YAML::Node root = ParseYaml(yaml_text, origin);
  const std::string expected = "expected a mapping with keys " + Join(ChildrenOf(""), ", ");
  if (!root.IsDefined() || root.IsNull()) {
    Fail(origin + ": empty (no keys); " + expected + ", or {} for all defaults");
  }
  if (!root.IsMap()) {
    Fail(origin + ": top level is " + (root.IsSequence() ? "a list" : "a scalar") + "; " +
         expected);
  }
  return Resolve(&root, origin, base_dir, overrides);
}

Config LoadConfig(const std::string& path, const std::vector<std::string>& overrides) {
  if (path.empty()) return Resolve(nullptr, "", "", overrides);
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (!file) Fail("cannot read '" + path + "': " + std::strerror(errno));
  std::string text;
  char buf[65536];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, file)) > 0) {
    text.append(buf, n);
    if (text.size() > kMaxConfigBytes) {
      std::fclose(file);
      Fail("'" + path + "' is larger than " + std::to_string(kMaxConfigBytes >> 20) +
           " MiB; is it a config file?");
    }
  }
  int read_errno = std::ferror(file) ? errno : 0;
  std::fclose(file);
  if (read_errno != 0) Fail("cannot read '" + path + "': " + std::strerror(read_errno));
  const size_t slash = path.rfind('/');
  return LoadConfigFromString(text, path, overrides,
                              slash == std::string::npos ? "." : path.substr(0, slash));
}

std::vector<std::string> RejoinOverrides(const std::vector<std::string>& pieces) {
  std::vector<std::string> out;
  int open = 0;  // unclosed [ and { in out.back()
  for (const std::string& piece : pieces) {
    if (!out.empty() && (open > 0 || piece.find('=') == std::string::npos)) {
      out.back() += "," + piece;
    } else {
      out.push_back(piece);
    }
    open = 0;
    for (char c : out.back()) open += (c == '[' || c == '{') - (c == ']' || c == '}');
  }
  return out;
}

const std::vector<std::string>& ConfigKeys() { return LeafKeys(); }

AutoDevices ResolveAutoDevices(Config* config, int cuda_devices, bool cuda_built) {
  PipelineConfig& p = config->pipeline;
  std::vector<std::string*> fields{&p.encoder.device, &p.decoder.device};
  for (std::string& d : p.devices) fields.push_back(&d);
  AutoDevices out;
  for (std::string* d : fields) {
    if (*d != "auto") continue;
    out.chosen = cuda_devices > 0 ? "cuda" : "cpu";
    *d = out.chosen;
  }
  if (out.chosen.empty()) return out;
  if (cuda_devices > 0) {
    out.why = "device auto: cuda (LibTorch sees " + std::to_string(cuda_devices) +
              " CUDA device(s); the stages use cuda:0";
    if (p.stages() > 1 && p.devices.empty()) out.why += " and take turns on it";
    out.why += "; pipeline.devices spreads them over more)";
  } else if (cuda_built) {
    out.why =
        "device auto: cpu (this LibTorch has CUDA but sees no CUDA device: no GPU, no driver, "
        "or CUDA_VISIBLE_DEVICES hides them)";
  } else {
    out.why = "device auto: cpu (this LibTorch was built without CUDA)";
  }
  return out;
}

std::string DumpConfig(const Config& c) {
  std::string out;
  auto line = [&out](int indent, const std::string& key, const std::string& value) {
    out += std::string(static_cast<size_t>(indent), ' ') + key + ":" +
           (value.empty() ? "" : " " + value) + "\n";
  };
  auto num = [](long long v) { return std::to_string(v); };

  line(0, "model", "");
  if (c.model.kind != "classic") line(2, "kind", Quote(c.model.kind));
  line(2, "dims", num(c.model.dims));
  line(2, "in_channels", num(c.model.in_channels));
  line(2, "num_classes", num(c.model.num_classes));
  if (!c.model.regions.empty()) {  // written only when set: other dumps stay as they were
    std::vector<std::string> regions;
    for (const std::vector<int>& region : c.model.regions) regions.push_back(IntList(region));
    line(2, "regions", "[" + Join(regions, ", ") + "]");
    line(2, "regions_class_order", IntList(c.model.regions_class_order));
  }
  if (c.model.kind == "classic") {
    line(2, "features", IntList(c.model.features));
    line(2, "norm", Quote(c.model.norm));
    line(2, "groups", num(c.model.groups));
  } else if (c.model.kind == "nnunet") {
    // The plan, resolved: the dump stands without the plans file (and loads
    // back to the same dump, which the stage handshake compares).
    line(2, "architecture", NnunetArchitectureText(c.model.nnunet));
  } else {
    line(2, "path", Quote(c.model.path));
  }

  line(0, "data", "");
  line(2, "kind", Quote(c.data.kind));
  if (c.data.kind != "nnunet") line(2, "path", Quote(c.data.path));
  line(2, "size", IntList(c.data.size));
  line(2, "samples", num(c.data.samples));
  line(2, "foreground_fraction", FormatDouble(c.data.foreground_fraction));
  line(2, "augment", "[" + Join(c.data.augment, ", ") + "]");
  // Written only when set, so a config without them dumps (and hashes) as
  // before.
  if (c.data.workers > 0) line(2, "workers", num(c.data.workers));
  if (c.data.kind == "nnunet") {
    line(2, "dataset", Quote(c.data.dataset));
    line(2, "plans", Quote(c.data.plans));
    line(2, "configuration", Quote(c.data.configuration));
    line(2, "fold", Quote(c.data.fold));
    line(2, "preprocessed", Quote(c.data.preprocessed));
    line(2, "results", Quote(c.data.results));
    line(2, "cache", Quote(c.data.cache));
  }
  if (!c.data.validation_cases.empty()) {
    std::vector<std::string> quoted;
    for (const std::string& name : c.data.validation_cases) quoted.push_back(Quote(name));
    line(2, "validation", "[" + Join(quoted, ", ") + "]");
  } else if (c.data.validation > 0) {
    line(2, "validation", FormatDouble(c.data.validation));
  }

  const TrainConfig& t = c.train;
  line(0, "train", "");
  line(2, "batch_size", num(t.batch_size));
  line(2, "micro_batches", num(t.micro_batches));
  line(2, "steps", num(t.steps));
  line(2, "lr", FormatDouble(t.lr));
  line(2, "optimizer", Quote(t.optimizer));
  line(2, "momentum", FormatDouble(t.momentum));
  // Written only when set, so earlier configs dump (and hash) as before.
  if (t.preset != "none") line(2, "preset", Quote(t.preset));
  if (t.nesterov) line(2, "nesterov", "true");
  line(2, "weight_decay", FormatDouble(t.weight_decay));
  line(2, "lr_schedule", Quote(t.lr_schedule));
  if (t.lr_schedule == "poly" || t.steps_per_epoch > 0) {
    line(2, "steps_per_epoch", num(t.steps_per_epoch));
    line(2, "poly_exponent", FormatDouble(t.poly_exponent));
  }
  line(2, "warmup_steps", num(t.warmup_steps));
  line(2, "grad_clip", FormatDouble(t.grad_clip));
  line(2, "loss", Quote(t.loss));
  line(2, "batch_dice", t.batch_dice ? "true" : "false");
  if (c.model.kind != "classic") line(2, "deep_supervision", t.deep_supervision ? "true" : "false");
  line(2, "precision", Quote(t.precision));
  line(2, "loss_scale", "");
  line(4, "init", FormatDouble(t.loss_scale_init));
  line(4, "growth_interval", num(t.loss_scale_growth_interval));
  line(2, "memory_budget", t.memory_budget > 0 ? std::to_string(t.memory_budget) : "null");
  line(2, "checkpointing", Quote(t.checkpointing));
  if (t.offload != "off") line(2, "offload", Quote(t.offload));  // earlier configs hash as before
  line(2, "seed", std::to_string(t.seed));
  line(2, "threads", num(t.threads));

  line(0, "checkpoint", "");
  line(2, "every", num(c.checkpoint.every));
  line(2, "keep", num(c.checkpoint.keep));

  if (c.data.HasValidation()) {
    line(0, "validate", "");
    line(2, "every", num(c.validate.every));
    line(2, "overlap", FormatDouble(c.validate.overlap));
    // Written only when not the default, so earlier configs hash as before.
    if (c.validate.nnunet != "on") line(2, "nnunet", Quote(c.validate.nnunet));
  }

  const PipelineConfig& p = c.pipeline;
  line(0, "pipeline", "");
  line(2, "transport", Quote(p.transport));
  line(2, "activations", Quote(p.activations));
  // Written only when not the default, so earlier configs hash as before.
  if (p.recompute_unit != "level") line(2, "recompute_unit", Quote(p.recompute_unit));
  if (p.offload != "off") line(2, "offload", Quote(p.offload));
  line(2, "schedule", Quote(p.schedule));
  line(2, "lock", Quote(p.lock));
  line(2, "park", Quote(p.park));
  line(2, "prefetch", Quote(p.prefetch));
  line(2, "timeout_s", FormatDouble(p.timeout_s));
  // Written only when more than two stages are asked for, so a two-stage
  // config dumps (and hashes) as before.
  if (p.encoder_parts > 1) line(2, "encoder_parts", num(p.encoder_parts));
  if (p.decoder_parts > 1) line(2, "decoder_parts", num(p.decoder_parts));
  if (p.replicas > 1) line(2, "replicas", num(p.replicas));
  if (p.balance != "memory") line(2, "balance", Quote(p.balance));
  if (!p.encoder_cuts.empty() || !p.decoder_cuts.empty()) {
    line(2, "cuts", "");
    if (!p.encoder_cuts.empty()) line(4, "encoder", IntList(p.encoder_cuts));
    if (!p.decoder_cuts.empty()) line(4, "decoder", IntList(p.decoder_cuts));
  }
  if (p.placement != "listed") line(2, "placement", Quote(p.placement));
  if (!p.devices.empty()) {
    std::vector<std::string> quoted;
    for (const std::string& d : p.devices) quoted.push_back(Quote(d));
    line(2, "devices", "[" + Join(quoted, ", ") + "]");
  }
  if (!p.nodes.empty()) line(2, "nodes", IntList(p.nodes));
  line(2, "stages", "");
  line(4, "encoder", "");
  line(6, "device", Quote(p.encoder.device));
  line(6, "node", num(p.encoder.node));
  line(4, "decoder", "");
  line(6, "device", Quote(p.decoder.device));
  line(6, "node", num(p.decoder.node));
  return out;
}

}  // namespace up
