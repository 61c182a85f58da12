// Test support: the checks every model kind's training must pass, with real
// `unet-pipeline train` runs (GoogleTest assertions).
#pragma once

#include <string>
#include <vector>

namespace up::test {

// Trains `config` with `set` (which holds train.steps=4 and checkpoint.every=2)
// single-process, as a gpipe pipeline with recompute, and in four stages
// (each half in two parts, with `parts_set` too): the same param_digest.
// Then two steps, resumed to four: the same again. The runs are
// DIR/single, DIR/pipe, DIR/parts and DIR/resumed.
void ExpectPipelineEqualsSingleProcessAndResumeIsExact(
    const std::string& config, const std::vector<std::string>& set, const std::string& dir,
    const std::vector<std::string>& parts_set = {});

// Nothing of the run in folder `run` remains: no process mentions its
// config, and no shared-memory segment or socket folder carries its run id
// (from its summary.json).
void ExpectNothingLeft(const std::string& run);

}  // namespace up::test
