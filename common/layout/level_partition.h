// How a U-Net's levels are cut into pipeline parts: the encoder's levels
// into `pipeline.encoder_parts` parts and the decoder's into
// `pipeline.decoder_parts`, each part a run of adjacent levels. Either from
// the user's cut points (`pipeline.cuts`: the level indices where a new part
// starts) or chosen to balance a cost per level (the peak bytes `plan`
// estimates for it): the cuts whose largest part costs least. Torch-free;
// pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace up {

struct PartRange {
  int first = 0;  // the part's first level
  int count = 0;  // how many levels, >= 1
  bool operator==(const PartRange& o) const { return first == o.first && count == o.count; }
};

// The parts of `levels` levels cut at `cuts` (ascending, each in
// [1, levels - 1]). UsageError naming `key` and the valid range for a cut
// out of range, repeated or out of order (a part would be empty).
std::vector<PartRange> PartsFromCuts(int levels, const std::vector<int>& cuts,
                                     const std::string& key);

// The cuts splitting levels of cost `cost` (one entry each, >= 0) into
// `parts` parts so that the costliest part costs least (ties broken the
// same way every time: each part, from the last, starts as early as the
// optimum allows). UsageError naming `key` for parts < 1 or more parts than
// levels.
std::vector<int> BalancedCuts(const std::vector<int64_t>& cost, int parts, const std::string& key);

}  // namespace up
