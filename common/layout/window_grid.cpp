// See window_grid.h.
#include "common/layout/window_grid.h"

#include <algorithm>

namespace up {

std::vector<int64_t> WindowFor(const std::vector<int64_t>& spatial,
                               const std::vector<int64_t>& window) {
  if (window.size() + 1 != spatial.size()) return window;
  std::vector<int64_t> out{1};
  out.insert(out.end(), window.begin(), window.end());
  return out;
}

std::vector<int64_t> WindowStarts(int64_t size, int64_t window, double overlap) {
  if (size <= window) return {0};
  const int64_t step =
      std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(window) * (1 - overlap)));
  std::vector<int64_t> starts;
  for (int64_t s = 0;; s += step) {
    if (s + window >= size) {
      starts.push_back(size - window);
      break;
    }
    starts.push_back(s);
  }
  return starts;
}

std::vector<int64_t> PaddedSize(const std::vector<int64_t>& spatial,
                                const std::vector<int64_t>& window) {
  std::vector<int64_t> out(spatial.size());
  for (size_t a = 0; a < spatial.size(); ++a) out[a] = std::max(spatial[a], window.at(a));
  return out;
}

std::vector<std::vector<int64_t>> WindowGrid(const std::vector<int64_t>& spatial,
                                             const std::vector<int64_t>& asked, double overlap) {
  const std::vector<int64_t> window = WindowFor(spatial, asked);
  const std::vector<int64_t> padded = PaddedSize(spatial, window);
  std::vector<std::vector<int64_t>> out{{}};
  for (size_t a = 0; a < padded.size(); ++a) {
    std::vector<std::vector<int64_t>> next;
    for (const std::vector<int64_t>& prefix : out) {
      for (int64_t s : WindowStarts(padded[a], window[a], overlap)) {
        next.push_back(prefix);
        next.back().push_back(s);
      }
    }
    out = std::move(next);
  }
  return out;
}

std::vector<ValidationBatch> ValidationPlan(const std::vector<std::vector<int64_t>>& case_shapes,
                                            const std::vector<int64_t>& window, double overlap,
                                            int64_t batch) {
  std::vector<ValidationBatch> plan;
  for (size_t c = 0; c < case_shapes.size(); ++c) {
    const int64_t windows =
        static_cast<int64_t>(WindowGrid(case_shapes[c], window, overlap).size());
    for (int64_t first = 0; first < windows; first += batch) {
      const int64_t count = std::min(batch, windows - first);
      plan.push_back({static_cast<int64_t>(c), first, count, first + count == windows});
    }
  }
  return plan;
}

}  // namespace up
