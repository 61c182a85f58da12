// See val_metrics.h.
#include "common/run/val_metrics.h"

#include <cmath>
#include <filesystem>
#include <limits>
#include <stdexcept>

#include "common/base/fs_util.h"
#include "common/run/checkpoint_manifest.h"
#include "common/run/metrics_format.h"

namespace up {

std::vector<ValidationEntry> ValidationEntries(int num_classes, bool brats_regions) {
  std::vector<ValidationEntry> out;
  for (int64_t k = 1; k < num_classes; ++k) out.push_back({std::to_string(k), {k}, false});
  if (brats_regions) {
    out.push_back({"wt", {1, 2, 3}, true});
    out.push_back({"tc", {1, 3}, true});
    out.push_back({"et", {3}, true});
  }
  return out;
}

std::vector<ValidationEntry> RegionEntries(const std::vector<std::vector<int>>& regions) {
  std::vector<ValidationEntry> out;
  for (size_t r = 0; r < regions.size(); ++r)
    out.push_back({"r" + std::to_string(r + 1),
                   std::vector<int64_t>(regions[r].begin(), regions[r].end()), false});
  return out;
}

ValidationScores ScoreValidation(const std::vector<std::vector<int64_t>>& counts,
                                 const std::vector<ValidationEntry>& entries) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const size_t n = entries.size();
  std::vector<double> sum(n, 0);
  std::vector<int64_t> scored(n, 0);
  for (const std::vector<int64_t>& c : counts) {
    if (c.size() != 3 * n) {
      throw std::invalid_argument("validation counts: " + std::to_string(c.size()) +
                                  " numbers for a case, expected " + std::to_string(3 * n));
    }
    for (size_t e = 0; e < n; ++e) {
      const int64_t tp = c[3 * e], fp = c[3 * e + 1], fn = c[3 * e + 2];
      if (tp + fp + fn == 0) continue;  // in neither: no score for this case
      sum[e] += 2.0 * static_cast<double>(tp) / static_cast<double>(2 * tp + fp + fn);
      ++scored[e];
    }
  }
  ValidationScores s;
  s.cases = static_cast<int64_t>(counts.size());
  double class_sum = 0;
  int classes = 0;
  for (size_t e = 0; e < n; ++e) {
    s.per_entry.push_back(scored[e] > 0 ? sum[e] / static_cast<double>(scored[e]) : nan);
    if (!entries[e].region && scored[e] > 0) {
      class_sum += s.per_entry.back();
      ++classes;
    }
  }
  s.mean = classes > 0 ? class_sum / classes : nan;
  return s;
}

BestValidation RecallBestValidation(const std::string& run_dir) {
  BestValidation best;
  try {
    const std::filesystem::path dir(run_dir);
    const std::string manifest = (dir / "checkpoints" / "best" / "manifest.json").string();
    std::error_code ec;
    if (!std::filesystem::exists(manifest, ec)) return best;
    const int64_t step = ParseManifest(ReadFile(manifest)).step;
    for (const MetricsPoint& p : ReadMetricsFile((dir / kMetricsFile).string())) {
      if (p.step == step && std::isfinite(p.val_dice)) {
        best.dice = p.val_dice;
        best.step = step;
      }
    }
  } catch (const std::exception&) {
    return BestValidation{};  // no best to keep: the next validation sets one
  }
  return best;
}

bool BestValidation::Offer(const ValidationScores& scores, int64_t at_step) {
  if (!(scores.mean > dice)) return false;
  dice = scores.mean;
  step = at_step;
  return true;
}

}  // namespace up
