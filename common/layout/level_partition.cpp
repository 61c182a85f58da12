// See level_partition.h.
#include "common/layout/level_partition.h"

#include <algorithm>
#include <limits>

#include "common/base/errors.h"

namespace up {

std::vector<PartRange> PartsFromCuts(int levels, const std::vector<int>& cuts,
                                     const std::string& key) {
  std::vector<PartRange> parts;
  int first = 0;
  for (int cut : cuts) {
    if (cut <= first || cut >= levels) {
      throw UsageError(key + ": cut " + std::to_string(cut) + " would leave a part empty; cuts " +
                       "are level indices in ascending order, each in [1, " +
                       std::to_string(levels - 1) + "] (" + std::to_string(levels) + " levels)");
    }
    parts.push_back({first, cut - first});
    first = cut;
  }
  parts.push_back({first, levels - first});
  return parts;
}

std::vector<int> BalancedCuts(const std::vector<int64_t>& cost, int parts, const std::string& key) {
  const int n = static_cast<int>(cost.size());
  if (parts < 1 || parts > n) {
    throw UsageError(key + " = " + std::to_string(parts) + ": must be in [1, " + std::to_string(n) +
                     "], one part per level at most (" + std::to_string(n) + " levels)");
  }
  std::vector<int64_t> prefix(static_cast<size_t>(n) + 1, 0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + cost[static_cast<size_t>(i)];
  const int64_t kInf = std::numeric_limits<int64_t>::max();
  // best[p][i]: the least largest part of levels [0, i) in p parts; from[p][i]: where the last
  // starts.
  std::vector<std::vector<int64_t>> best(parts + 1, std::vector<int64_t>(n + 1, kInf));
  std::vector<std::vector<int>> from(parts + 1, std::vector<int>(n + 1, 0));
  best[0][0] = 0;
  for (int p = 1; p <= parts; ++p) {
    for (int i = p; i <= n; ++i) {
      for (int j = p - 1; j < i; ++j) {  // the last part is [j, i)
        if (best[p - 1][j] == kInf) continue;
        const int64_t worst = std::max(best[p - 1][j], prefix[i] - prefix[j]);
        if (worst < best[p][i]) {  // strict: the earliest start wins a tie
          best[p][i] = worst;
          from[p][i] = j;
        }
      }
    }
  }
  std::vector<int> cuts;
  for (int p = parts, i = n; p > 1; --p) {
    i = from[p][i];
    cuts.push_back(i);
  }
  std::reverse(cuts.begin(), cuts.end());
  return cuts;
}

}  // namespace up
