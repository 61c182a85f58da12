// The config room's text helpers: values rendered for error lines and the
// dump, and YAML scalars parsed as numbers. Internal to common/config/.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

namespace up {

// Throws up::UsageError("config: " + message).
[[noreturn]] void ConfigFail(const std::string& message);

std::string Join(const std::vector<std::string>& parts, const std::string& sep);

// The section a dotted key path lies in: "train.loss_scale" for
// "train.loss_scale.init", "" for a top-level name.
std::string SectionOfKey(const std::string& path);

// `s` in double quotes with ", \ and control characters escaped; valid as a
// YAML double-quoted scalar.
std::string Quote(const std::string& s);

// A node as the user wrote it: plain numbers bare, other scalars quoted,
// lists and mappings in flow style.
std::string Render(const YAML::Node& node);

// "[1, 2, 3]".
std::string IntList(const std::vector<int>& values);

// The shortest "%.Ng" form that reads back to exactly `v`.
std::string FormatDouble(double v);

// A scalar YAML did not tag as a string ("!" marks a quoted one).
bool IsPlainScalar(const YAML::Node& node);

enum class Parsed { kOk, kBadType, kOverflow };

// A plain scalar holding a base-10 integer.
Parsed ParseInteger(const YAML::Node& node, long long* out);

// A plain scalar holding a finite decimal number (integers included).
bool ParseReal(const YAML::Node& node, double* out);

}  // namespace up
