// Reads the given keys (config_sources.h) onto a Config, each checked for
// type and range as it is read; the first problem throws up::UsageError with
// one line: "config: <key.path> = <value as given>: <what is expected>".
// Internal to common/config/.
#pragma once

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/base/byte_size.h"
#include "common/base/errors.h"
#include "common/config/config.h"
#include "common/config/config_keys.h"
#include "common/config/config_sources.h"
#include "common/config/config_text.h"

namespace up {

inline bool Contains(const std::vector<std::string>& list, const std::string& s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

class Reader {
 public:
  explicit Reader(GivenKeys given) : given_(std::move(given)) {}

  bool Has(const std::string& path) const { return given_.count(path) != 0; }
  const YAML::Node& Node(const std::string& path) const { return given_.at(path); }

  // The value as the user gave it, or `fallback` (the current value) if not given.
  std::string Shown(const std::string& path, const std::string& fallback) const {
    return Has(path) ? Render(Node(path)) : fallback;
  }

  [[noreturn]] void FailAt(const std::string& path, const std::string& fallback,
                           const std::string& what) const {
    ConfigFail(path + " = " + Shown(path, fallback) + ": " + what);
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
      ConfigFail(e.what());
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

  // The key's value as its table row says (type, range, choices), if given.
  void Key(const ConfigKey& key, Config* c) const;
  void Key(const std::string& path, Config* c) const { Key(*FindConfigKey(path), c); }
  // Every key of `section` ("train") the generic loop reads, in table order.
  void Section(const std::string& section, Config* c) const;
  // Fails on the first key of `section` given although its row's When does
  // not hold for `c` ("applies only to model.kind = classic (model.kind is
  // nnunet)").
  void CheckApplies(const std::string& section, const Config& c) const;

 private:
  GivenKeys given_;
};

}  // namespace up
