// The rules that tie several config keys together, checked after every key
// was read on its own (config_reader.h), grouped by family: validation,
// model, data against model, batches, and what the stages keep; last, the
// pipeline's parts, cuts and placement against the model's levels
// (common/layout/pipeline_layout.h). The first broken rule throws
// up::UsageError naming one key, its value and the nearest valid values.
// Internal to common/config/.
#pragma once

#include "common/config/config.h"
#include "common/config/config_reader.h"

namespace up {

void CheckConsistency(const Reader& r, const Config& c);

}  // namespace up
