// A tensor shape as messages write it: "1x4x16x16" ("()" for a scalar).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace up {

inline std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string out;
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? "x" : "") + std::to_string(shape[i]);
  return out.empty() ? "()" : out;
}

}  // namespace up
