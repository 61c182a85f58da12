// The reference trainer: the whole U-Net in one process, with the gradient
// accumulation the pipeline uses (the batch split into micro-batches, each
// loss scaled by 1/micro_batches, one optimizer step per batch, the encoder's
// and decoder's optimizers kept apart exactly as the two stages keep them).
// The pipeline must reproduce its `param_digest` bit for bit on CPU.
#pragma once

#include <optional>
#include <string>

#include "common/config/config.h"
#include "common/run/run_dir.h"
#include "common/training/checkpoint.h"
#include "launcher/run_summary.h"

namespace up {

// Trains from `resume` (or from scratch) to config.train.steps, writing
// metrics, checkpoints and summary.json into `run`.
TrainSummary RunSingleProcess(const Config& config, RunDir& run,
                              const std::optional<CheckpointRef>& resume);

}  // namespace up
