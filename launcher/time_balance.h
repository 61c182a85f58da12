// pipeline.balance: time at the start of a run (issue 30): each half's
// levels timed on its stages' device by the stage binaries themselves
// (`encoder_proc --time-levels`, common/model/level_timing.h), then the cuts
// the config leaves open filled so the parts' times are as even as the
// levels allow (common/layout/level_times.h). The launcher writes the filled cuts
// into the run's config.yaml, so every stage, a resume and the other nodes
// (which take node 0's cuts at the rendezvous) run the same parts.
#pragma once

#include <optional>
#include <string>

#include "common/config/config.h"
#include "common/layout/level_times.h"

namespace up {

// When `config` asks for them (NeedsLevelTimes): times the encoder's levels
// on its first part's device and the decoder's on its last's, one after the
// other (node 0's devices, standing for every node's), and fills the cuts.
// nullopt (config untouched) otherwise. UsageError / RuntimeError, one line
// naming the half and the device, when a timing process fails.
std::optional<LevelTimes> BalanceByTime(Config* config);

// One line for the log: each half's level times and the parts they make.
std::string DescribeTimeBalance(const LevelTimes& times, const Config& config);

// The times and the cuts they gave, for the run folder's level_times.json.
std::string LevelTimesFile(const LevelTimes& times, const Config& config);

// The cuts of `config` as the rendezvous carries them ("1,3;2"), and back
// into a config (a node other than 0 takes node 0's).
std::string EncodeCuts(const PipelineConfig& p);
void DecodeCuts(const std::string& text, PipelineConfig* p);

}  // namespace up
