// The one line a run that runs out of device memory ends with: which process,
// where in the step, what it asked for against what was in use and the
// budget, and which settings `plan` would try first.
#pragma once

#include <c10/util/Exception.h>

#include <string>

#include "common/config/config.h"

namespace up {

// `process`: "single-process trainer", "encoder stage", ...; `single_process`
// picks the suggestions. Reads the place (SetMemoryPlace) and the budget's
// last refusal (tensor_accounting.h).
std::string OutOfMemoryLine(const std::string& process, const c10::OutOfMemoryError& e,
                            const Config& config, bool single_process);

// The line's advice alone: "to fit, try ... (`unet-pipeline plan` predicts each)".
std::string FitSuggestions(const Config& config, bool single_process);

}  // namespace up
