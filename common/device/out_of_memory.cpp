// See out_of_memory.h.
#include "common/device/out_of_memory.h"

#include <vector>

#include "common/base/byte_size.h"
#include "common/device/tensor_accounting.h"

namespace up {
namespace {

// What to change, cheapest first, as `plan` ranks the ways of training.
std::vector<std::string> Suggestions(const Config& c, bool single_process) {
  std::vector<std::string> out;
  const int per_micro_batch = MicroBatchSamples(c);
  if (single_process) {
    if (c.train.checkpointing == Checkpointing::kOff) out.push_back("train.checkpointing=levels");
    out.push_back("the pipeline (drop --single-process) with pipeline.activations=recompute");
  } else {
    if (c.pipeline.activations == Activations::kKeep)
      out.push_back("pipeline.activations=recompute");
    // auto parks where the stages share a card (a budgeted CPU device is one)
    const bool shared = c.pipeline.encoder.device == c.pipeline.decoder.device;
    if (shared && c.pipeline.park == Park::kNever) out.push_back("pipeline.park=always");
  }
  if (per_micro_batch > 1)
    out.push_back("train.micro_batches=" + std::to_string(c.train.batch_size));
  out.push_back("a smaller data.size or model.features");
  return out;
}

}  // namespace

std::string OutOfMemoryLine(const std::string& process, const c10::OutOfMemoryError& e,
                            const Config& config, bool single_process) {
  std::string what;
  if (const std::optional<Refusal> r = LastRefusal()) {
    what = "tried to allocate " + FormatBytes(r->requested) + " with " + FormatBytes(r->in_use) +
           " of the device's " + FormatBytes(r->budget) + " (train.memory_budget) in use";
  } else {
    what = e.what_without_backtrace();
    what = what.substr(0, what.find('\n'));
  }
  const std::string place = MemoryPlace();
  return "out of memory in the " + process + (place.empty() ? "" : " at " + place) + ": " + what +
         "; " + FitSuggestions(config, single_process);
}

std::string FitSuggestions(const Config& config, bool single_process) {
  std::string line = "to fit, try ";
  const std::vector<std::string> tries = Suggestions(config, single_process);
  for (size_t i = 0; i < tries.size(); ++i) line += (i ? ", " : "") + tries[i];
  return line + " (`unet-pipeline plan` predicts each)";
}

}  // namespace up
