// See config_text.h.
#include "common/config/config_text.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "common/base/errors.h"

namespace up {
namespace {

bool LooksNumeric(const std::string& s) {
  if (s.empty()) return false;
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

}  // namespace

void ConfigFail(const std::string& message) { throw UsageError("config: " + message); }

std::string SectionOfKey(const std::string& path) {
  const size_t dot = path.rfind('.');
  return dot == std::string::npos ? "" : path.substr(0, dot);
}

std::string Join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? sep : "") + parts[i];
  return out;
}

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

std::string FormatDouble(double v) {
  char buf[40];
  for (int precision = 15; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

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

}  // namespace up
