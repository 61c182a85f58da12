// Test support: the checks every model kind's training must pass, with real
// `unet-pipeline train` runs (GoogleTest assertions).
#pragma once

#include <string>
#include <vector>

namespace up::test {

// Trains `config` with `set` (which holds train.steps=4 and checkpoint.every=2)
// single-process, and as a gpipe pipeline with recompute: the same
// param_digest. Then two steps, resumed to four: the same again. The runs are
// DIR/single, DIR/pipe and DIR/resumed.
void ExpectPipelineEqualsSingleProcessAndResumeIsExact(const std::string& config,
                                                       const std::vector<std::string>& set,
                                                       const std::string& dir);

}  // namespace up::test
