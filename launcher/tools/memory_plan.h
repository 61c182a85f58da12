// Predicting peak device memory from shapes alone, for `unet-pipeline plan`.
//
// The model is an estimate with stated parts, not a measurement:
//   state      weights + gradients + optimizer state (Adam 2x, SGD 1x) + buffers
//   activations what autograd keeps per sample: per double convolution at
//              width F over V voxels, ~4*F*V (norm inputs, ReLU outputs), plus
//              its input; per decoder level ~6*F*V (the concatenation is 2F);
//              max-pool indices (int64); the head's logits and softmax
//   boundary   the bottleneck and every skip of one micro-batch (and their
//              gradients) as they sit on the device
//   workspace  the transient of a backward step: twice the stage's largest
//              single activation tensor for one micro-batch
//   context    the CUDA context per process (card_budget.h)
// Each row's verdict is card_budget.h's: the tensor bytes that decide
// (measured, else this estimate less its contexts) with the allocator's
// reserve, a workspace and a context per process, against the card less
// the headroom.
// Pure arithmetic, tested on small models whose numbers can be counted by hand;
// the per-level counts are common/layout/level_counts.h's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/base/byte_size.h"
#include "common/config/config.h"
#include "common/layout/level_counts.h"
#include "launcher/tools/card_budget.h"
#include "launcher/tools/host_budget.h"

namespace up {

struct PlanRow {
  // "single-process", "single-process checkpointing", "single-process
  // checkpointing blocks", "single-process offload", "pipeline keep",
  // "pipeline recompute", "pipeline recompute blocks", "pipeline offload"
  // (the blocks rows where the kind has blocks; the offload rows recompute
  // by blocks where it has them, else by levels)
  std::string name;
  std::string peak_phase;  // which turn sets the peak
  // How to train this way: `train` with --single-process or not, and these
  // --set overrides (the pipeline rows park both stages on one device).
  bool single_process = false;
  std::vector<std::string> sets{};
  int processes = 1;        // each pays a CUDA context on the card
  bool recomputes = false;  // runs a forward twice
  bool offload = false;     // copies what it keeps to host memory and back
  bool blocks = false;      // recomputes block by block
  // model.memory: lean (a row named "... lean" beside the way as written):
  // the same weights in blocks that hold less, a few percent more work.
  bool lean = false;
  int64_t state_bytes = 0;
  int64_t activation_bytes = 0;
  int64_t boundary_bytes = 0;
  int64_t workspace_bytes = 0;
  int64_t context_bytes = 0;
  int64_t peak_bytes = 0;  // the estimate from shapes: the parts above, contexts included
  // Measured (memory_probe.h), when plan measures: the device's peak tensor
  // bytes, and each stage's.
  int64_t tensor_bytes = -1;
  std::vector<std::pair<std::string, int64_t>> stage_tensor_bytes{};  // by stage key
  // The verdict (DecideFit): what the way needs on the card, in parts
  // (need.tensor_bytes is tensor_estimate()), and whether that fits.
  CardNeed need{};
  bool fits = false;
  // The host's side (host_budget.h), set by `plan`: what every process of
  // the way holds in host memory together at its peak (measured: the probes'
  // summed peak resident sizes, extrapolated; else host_need's estimate),
  // and whether that fits --host-mem. Unset, a row fits the host.
  HostNeed host_need{};
  int64_t host_bytes = 0;
  bool host_measured = false;
  bool fits_host = true;

  bool measured() const { return tensor_bytes >= 0; }
  // The device's tensor bytes by what is known: measured, else the estimate
  // less the contexts.
  int64_t tensor_estimate() const { return measured() ? tensor_bytes : peak_bytes - context_bytes; }
};

// Sets `row`'s need from its tensor_estimate() and processes, and fits:
// need.total() <= usable_bytes. Call again after a measurement.
void DecideFit(int64_t usable_bytes, PlanRow* row);

// One row per way of training, each decided against `usable_bytes` (the
// card less the headroom) by its estimate. The pipeline rows assume both
// stages share the one device and park between turns (what a single card
// needs). Where the model can have lean blocks (LeanTwin), each way is
// followed by its twin with model.memory: lean, named "<way> lean".
std::vector<PlanRow> PlanMemory(const Config& config, int64_t usable_bytes);

// The config with model.memory: lean, where it is written (default) and its
// kind and precision allow lean blocks; nullopt otherwise.
std::optional<Config> LeanTwin(const Config& config);

// The stages of the config's own layout (pipeline.encoder_parts,
// pipeline.decoder_parts, the cuts), each estimated as the rows above: its
// levels' state, the activations it keeps (every micro-batch with keep, one
// with recompute: the sequential schedule), its inputs and outputs with their
// gradients, a backward workspace. Between its turns a parked stage still
// holds what autograd saved (keep's activations) on the device.
struct StagePlan {
  std::string key;          // "encoder", "decoder2"
  std::string levels;       // "levels 0-1"
  int64_t state_bytes = 0;  // weights, gradients, buffers (the optimizer's state is parked)
  int64_t activation_bytes = 0;
  int64_t boundary_bytes = 0;
  int64_t workspace_bytes = 0;
  // The sum: the stage's peak in its turn (or its whole state, with the
  // optimizer's, at its step, where that is more).
  int64_t turn_bytes = 0;
  int64_t residue_bytes = 0;  // on the device between its turns, parked
};
struct PartsPlan {
  int encoder_parts = 1;
  int decoder_parts = 1;
  std::vector<StagePlan> stages;
  // Every stage on one device, taking turns (parked): the largest turn plus
  // the others' residue, plus a context per process.
  int64_t shared_device_bytes = 0;
  // Each stage on a device of its own (not parked: its whole state stays),
  // the largest, plus one context.
  int64_t own_device_bytes = 0;
  // What each needs on a card (card_budget.h): its tensor bytes with the
  // allocator's reserve, a workspace and a context per process.
  CardNeed shared_need{}, own_need{};
};
PartsPlan PlanParts(const Config& config);

// The fewest stages (any split between the halves, the lowest peak among
// the splits of that count; balanced cuts, the config's activation policy)
// whose `shared` (one device in turns) or own-device need fits
// `usable_bytes`; nullopt when even one level per part does not.
std::optional<PartsPlan> FewestPartsThatFit(const Config& config, int64_t usable_bytes,
                                            bool shared);

// The --set overrides that train `config` the way `sets` names (a row's):
// the keys a way leaves unsaid back at their defaults (no checkpointing, no
// offload, keep; a pipeline way also none of the single-process trainer's)
// where the config has something else, and `sets`, each only
// where it differs from the config. What a probe runs and the recommended
// command says.
std::vector<std::string> WaySets(const Config& config, bool single_process,
                                 const std::vector<std::string>& sets);

// The way `plan` recommends: among the rows that fit the card (their `fits`,
// as DecideFit set it) and the host (`fits_host`), the least extra work: no recompute over
// recompute, no offload over offload, then the fewest processes, then levels over blocks; when no
// row fits, the fewest parts on the one device (`fewest_shared`, FewestPartsThatFit against the
// same card). `reason` says why, naming the ways with less work that do not fit and what each
// needs.
struct Recommendation {
  std::string way;  // a row's name, or "pipeline parts"
  bool single_process = false;
  std::vector<std::string> sets{};
  int64_t bytes = 0;  // what it needs on the card (CardNeed::total())
  std::string reason;
  bool fits = false;  // false: nothing does, and `reason` says what the floor needs
};
Recommendation Recommend(const Config& config, const std::vector<PlanRow>& rows,
                         const std::optional<PartsPlan>& fewest_shared, int64_t floor_bytes,
                         const CardBudget& card);

// `plan --gpu-mem` (see byte_size.h).
inline int64_t ParseBytes(const std::string& text) { return ParseByteSize(text, "--gpu-mem"); }

}  // namespace up
