// A builder for one flat-or-nested JSON object on one line, for metrics.jsonl
// records and summary.json.
//
// Contracts: fields appear in the order added; keys are not de-duplicated.
// Strings are escaped (", \, and every control character below 0x20 as
// \u00XX); other bytes, UTF-8 included, pass through unchanged. Doubles that
// are not finite become null; finite ones use the shortest "%.{15,16,17}g"
// form that strtod reads back exactly. Raw() inserts already-valid JSON (an
// object from another JsonWriter, an array) verbatim. Header-only.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace up {

class JsonWriter {
 public:
  JsonWriter& Field(const std::string& key, const std::string& value) {
    return Raw(key, Quote(value));
  }
  JsonWriter& Field(const std::string& key, const char* value) {
    return Field(key, std::string(value ? value : ""));
  }
  JsonWriter& Field(const std::string& key, int64_t value) {
    return Raw(key, std::to_string(value));
  }
  JsonWriter& Field(const std::string& key, int value) { return Raw(key, std::to_string(value)); }
  JsonWriter& Field(const std::string& key, uint64_t value) {
    return Raw(key, std::to_string(value));
  }
  JsonWriter& Field(const std::string& key, double value) { return Raw(key, FormatDouble(value)); }
  JsonWriter& Field(const std::string& key, bool value) {
    return Raw(key, value ? "true" : "false");
  }

  // `json_value` must already be valid JSON; it is inserted as is.
  JsonWriter& Raw(const std::string& key, const std::string& json_value) {
    if (!body_.empty()) body_ += ',';
    body_ += Quote(key);
    body_ += ':';
    body_ += json_value;
    return *this;
  }

  // Appends every field of `other`, in its order.
  JsonWriter& Append(const JsonWriter& other) {
    if (!other.body_.empty()) body_ += (body_.empty() ? "" : ",") + other.body_;
    return *this;
  }
  std::string str() const { return "{" + body_ + "}"; }

  // `s` as a JSON string literal.
  static std::string Quote(const std::string& s) {
    std::string out = "\"";
    for (char ch : s) {
      unsigned char c = static_cast<unsigned char>(ch);
      if (c == '"' || c == '\\') {
        out += '\\';
        out += ch;
      } else if (c < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out += buf;
      } else {
        out += ch;
      }
    }
    return out + "\"";
  }

  // `v` as a JSON array of numbers, each as FormatDouble writes it.
  static std::string Array(const std::vector<double>& v) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + FormatDouble(v[i]);
    return out + "]";
  }
  static std::string Array(const std::vector<int>& v) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + std::to_string(v[i]);
    return out + "]";
  }

  // `v` as a JSON number that round-trips, or null when not finite.
  static std::string FormatDouble(double v) {
    if (!std::isfinite(v)) return "null";
    char buf[32];
    for (int precision = 15; precision <= 17; ++precision) {
      std::snprintf(buf, sizeof buf, "%.*g", precision, v);
      if (std::strtod(buf, nullptr) == v) break;
    }
    return buf;
  }

 private:
  std::string body_;
};

}  // namespace up
