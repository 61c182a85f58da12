// See memory_plan.h.
#include "launcher/tools/memory_plan.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "common/base/errors.h"
#include "common/config/config_file.h"
#include "common/config/config_keys.h"
#include "common/layout/model_geometry.h"
#include "common/layout/pipeline_layout.h"

namespace up {

namespace {

// What checkpointing by `blocks` or levels holds of a stage, per sample: the
// units' inputs it keeps, and the one unit it rebuilds at a time.
int64_t CheckpointedElements(const StageCounts& s, bool blocks) {
  return blocks ? s.block_checkpoint_elements + s.largest_block
                : s.checkpoint_elements + s.largest_level;
}
// The one unit it rebuilds at a time.
int64_t Unit(const StageCounts& s, bool blocks) {
  return blocks ? s.largest_block : s.largest_level;
}

std::string Gib(int64_t bytes) { return FormatBytes(bytes); }

// "14.4 GiB (16.0 GiB less 10% headroom)".
std::string UsableText(const CardBudget& card) {
  return Gib(card.usable_bytes()) + " (" + Gib(card.card_bytes) + " less " + card.headroom_text +
         " headroom)";
}

}  // namespace

void DecideFit(int64_t usable_bytes, PlanRow* row) {
  row->need = NeedOnCard(row->tensor_estimate(), row->processes);
  row->fits = row->need.total() <= usable_bytes;
}

namespace {

// PlanMemory's rows for the config's own model.memory.
std::vector<PlanRow> PlanWays(const Config& c, int64_t usable_bytes) {
  const StageCounts enc = EncoderCounts(c), dec = DecoderCounts(c);
  const int64_t n = MicroBatchSamples(c);  // samples per micro-batch
  const int64_t m = c.train.micro_batches;
  const int64_t a = BytesPerActivation(c);
  const LevelGeometry g = Geometry(c.model);
  int64_t boundary = g.bottleneck_channels * VoxelsAt(c, g.scale.back());
  for (int i = 0; i < g.levels(); ++i) boundary += g.skip_channels[i] * VoxelsAt(c, g.scale[i]);
  const int64_t boundary_bytes = boundary * n * a;
  const bool has_blocks = c.model.kind != ModelKind::kTorchscript;
  const std::vector<std::string> parked{"pipeline.park=always"};

  std::vector<PlanRow> rows;
  PlanRow single{"single-process", "forward+backward of one micro-batch"};
  single.single_process = true;
  single.state_bytes = StateBytes(c, enc) + StateBytes(c, dec);
  single.activation_bytes = (enc.activation_elements + dec.activation_elements) * n * a;
  single.workspace_bytes = 2 * std::max(enc.largest_tensor, dec.largest_tensor) * n * a;
  single.context_bytes = kContextAllowanceBytes;
  rows.push_back(single);

  // Checkpointing keeps each unit's input (each level's: about the boundary,
  // the skips and the bottleneck, and the decoder levels' outputs of the same
  // sizes; each block's: also the tensors between blocks) and rebuilds one
  // unit at a time: the largest is at full resolution.
  for (bool blocks : {false, true}) {
    if (blocks && !has_blocks) continue;
    PlanRow ckpt{
        blocks ? "single-process checkpointing blocks" : "single-process checkpointing",
        blocks ? "backward of the largest block" : "backward of the full-resolution level"};
    ckpt.single_process = true;
    ckpt.sets = {std::string("train.checkpointing=") + (blocks ? "blocks" : "levels")};
    ckpt.recomputes = true;
    ckpt.blocks = blocks;
    ckpt.state_bytes = single.state_bytes;
    const int64_t kept = blocks ? enc.block_checkpoint_elements + dec.block_checkpoint_elements
                                : enc.checkpoint_elements + dec.checkpoint_elements;
    const int64_t unit = blocks ? std::max(enc.largest_block, dec.largest_block)
                                : std::max(enc.largest_level, dec.largest_level);
    ckpt.activation_bytes = (kept + unit) * n * a;
    ckpt.workspace_bytes = single.workspace_bytes;
    ckpt.context_bytes = kContextAllowanceBytes;
    rows.push_back(ckpt);
  }
  // Offloaded, the units' inputs wait in host memory: on the device one unit
  // rebuilt and the inputs it was fetched with (and, on a GPU, the next
  // one's being fetched).
  {
    PlanRow off{"single-process offload", "backward of the largest unit"};
    off.single_process = true;
    off.sets = {std::string("train.checkpointing=") + (has_blocks ? "blocks" : "levels"),
                "train.offload=on"};
    off.recomputes = off.offload = true;
    off.blocks = has_blocks;
    off.state_bytes = single.state_bytes;
    off.activation_bytes = std::max(Unit(enc, has_blocks), Unit(dec, has_blocks)) * n * a;
    off.workspace_bytes = single.workspace_bytes;
    off.context_bytes = kContextAllowanceBytes;
    rows.push_back(off);
  }

  for (const char* policy : {"keep", "recompute", "recompute blocks", "offload"}) {
    const bool keep = std::string(policy) == "keep";
    const bool offload = std::string(policy) == "offload";
    const bool blocks = std::string(policy) == "recompute blocks" || (offload && has_blocks);
    if (std::string(policy) == "recompute blocks" && !has_blocks) continue;
    // Encoder turns: its state, its activations (all micro-batches with keep;
    // with recompute one micro-batch's units' inputs and one unit rebuilt),
    // the boundary it writes out.
    // The boundary on the device: the encoder's outputs in its turns; the
    // decoder's inputs and their gradients in its turn, or (offload) only
    // the gradients, each input entering as its level runs; an offloading
    // encoder also holds the gradients it receives while its outputs wait
    // for them.
    const int64_t enc_boundary = (offload ? 2 : 1) * boundary_bytes;
    const int64_t dec_boundary = (offload ? 1 : 2) * boundary_bytes;
    const int64_t enc_acts = keep      ? enc.activation_elements * n * a * m
                             : offload ? Unit(enc, blocks) * n * a
                                       : CheckpointedElements(enc, blocks) * n * a;
    // Parked, a stage's turn holds the optimizer's state only for its step,
    // after the backward let the activations go.
    const int64_t enc_turn =
        std::max(TurnStateBytes(enc) + enc_acts + enc_boundary + 2 * enc.largest_tensor * n * a,
                 StateBytes(c, enc));
    // Decoder turn: its state and one micro-batch's activations, the boundary
    // and its gradients on the device; with keep, the encoder's kept
    // activations stay on the device too (autograd's saved tensors cannot be parked).
    const int64_t kept_from_encoder = keep ? enc.activation_elements * n * a * m : 0;
    const int64_t dec_acts = keep      ? dec.activation_elements * n * a
                             : offload ? Unit(dec, blocks) * n * a
                                       : CheckpointedElements(dec, blocks) * n * a;
    const int64_t dec_turn = std::max(TurnStateBytes(dec) + dec_acts + kept_from_encoder +
                                          dec_boundary + 2 * dec.largest_tensor * n * a,
                                      StateBytes(c, dec));
    PlanRow row{std::string("pipeline ") + policy,
                dec_turn >= enc_turn ? "decoder turn" : "encoder turn"};
    row.sets = parked;
    row.sets.push_back(std::string("pipeline.activations=") + (keep ? "keep" : "recompute"));
    if (blocks) row.sets.push_back("pipeline.recompute_unit=block");
    if (offload) row.sets.push_back("pipeline.offload=on");
    row.processes = 2;
    row.recomputes = !keep;
    row.offload = offload;
    row.blocks = blocks;
    const bool dec_peak = dec_turn >= enc_turn;
    row.state_bytes = dec_peak ? TurnStateBytes(dec) : TurnStateBytes(enc);
    row.activation_bytes = dec_peak ? dec_acts + kept_from_encoder : enc_acts;
    row.boundary_bytes = dec_peak ? dec_boundary : enc_boundary;
    row.workspace_bytes = 2 * (dec_peak ? dec.largest_tensor : enc.largest_tensor) * n * a;
    row.context_bytes = 2 * kContextAllowanceBytes;  // two processes, two contexts
    rows.push_back(row);
  }
  for (PlanRow& r : rows) {
    r.peak_bytes =
        r.state_bytes + r.activation_bytes + r.boundary_bytes + r.workspace_bytes + r.context_bytes;
    r.lean = c.model.memory == ModelMemory::kLean;
    DecideFit(usable_bytes, &r);
  }
  return rows;
}

}  // namespace

std::optional<Config> LeanTwin(const Config& c) {
  // config_rules.cpp refuses lean blocks in a TorchScript bundle and below fp32.
  if (c.model.memory != ModelMemory::kDefault || c.model.kind == ModelKind::kTorchscript ||
      c.train.precision != Precision::kFp32)
    return std::nullopt;
  Config lean = c;
  lean.model.memory = ModelMemory::kLean;
  return lean;
}

std::vector<PlanRow> PlanMemory(const Config& c, int64_t usable_bytes) {
  const std::vector<PlanRow> written = PlanWays(c, usable_bytes);
  const std::optional<Config> lean = LeanTwin(c);
  if (!lean) return written;
  const std::vector<PlanRow> twins = PlanWays(*lean, usable_bytes);
  std::vector<PlanRow> rows;
  for (size_t i = 0; i < written.size(); ++i) {
    rows.push_back(written[i]);
    PlanRow twin = twins[i];
    twin.name += " lean";
    twin.sets.push_back("model.memory=lean");
    rows.push_back(twin);
  }
  return rows;
}

std::vector<std::string> WaySets(const Config& c, bool single_process,
                                 const std::vector<std::string>& sets) {
  // The keys that choose a way: (key, the config's value, the default), as
  // the key table writes them.
  using Key = std::tuple<std::string, std::string, std::string>;
  const Config defaults = LoadConfig("", {});
  auto key = [&](const char* path) {
    const ConfigKey& k = *FindConfigKey(path);
    return Key{path, ShownDefault(k, c), ShownDefault(k, defaults)};
  };
  std::vector<Key> keys;
  if (single_process) {
    keys = {key("train.checkpointing"), key("train.offload")};
  } else {
    keys = {key("pipeline.activations"), key("pipeline.recompute_unit"), key("pipeline.offload"),
            // the single-process trainer's own, which the pipeline refuses
            key("train.checkpointing"), key("train.offload")};
  }
  std::vector<std::string> out;
  for (const auto& [key, now, fallback] : keys) {
    std::string want = fallback;
    for (const std::string& set : sets)
      if (set.rfind(key + "=", 0) == 0) want = set.substr(key.size() + 1);
    if (want != now) out.push_back(key + "=" + want);
  }
  for (const std::string& set : sets) {  // any other key, as given
    bool chooser = false;
    for (const auto& k : keys) chooser |= set.rfind(std::get<0>(k) + "=", 0) == 0;
    if (!chooser) out.push_back(set);
  }
  return out;
}

Recommendation Recommend(const Config& c, const std::vector<PlanRow>& rows,
                         const std::optional<PartsPlan>& fewest_shared, int64_t floor_bytes,
                         const CardBudget& card) {
  std::vector<const PlanRow*> order;
  for (const PlanRow& r : rows) order.push_back(&r);
  std::stable_sort(order.begin(), order.end(), [](const PlanRow* x, const PlanRow* y) {
    return std::make_tuple(x->recomputes, x->offload, x->processes, x->blocks, x->lean) <
           std::make_tuple(y->recomputes, y->offload, y->processes, y->blocks, y->lean);
  });
  const std::string usable = UsableText(card);
  std::string not_fitting;  // the ways with less work, and what they need
  for (const PlanRow* r : order) {
    if (!r->fits) {
      not_fitting += (not_fitting.empty() ? "" : ", ") + r->name + " needs " + Gib(r->need.total());
      continue;
    }
    if (!r->fits_host) {
      not_fitting += (not_fitting.empty() ? "" : ", ") + r->name + " needs " + Gib(r->host_bytes) +
                     " of host memory";
      continue;
    }
    Recommendation out;
    out.way = r->name;
    out.single_process = r->single_process;
    out.sets = WaySets(c, r->single_process, r->sets);
    out.bytes = r->need.total();
    out.fits = true;
    out.reason = "the least extra work that fits " + usable + ": it needs " + NeedText(r->need);
    if (r->host_bytes > 0) out.reason += ", and " + Gib(r->host_bytes) + " of host memory";
    if (!not_fitting.empty()) out.reason += "; less work does not fit: " + not_fitting;
    return out;
  }
  Recommendation out;
  if (fewest_shared) {
    out.way = "pipeline parts";
    out.sets = {"pipeline.park=always",
                "pipeline.encoder_parts=" + std::to_string(fewest_shared->encoder_parts),
                "pipeline.decoder_parts=" + std::to_string(fewest_shared->decoder_parts)};
    out.bytes = fewest_shared->shared_need.total();
    out.fits = true;
    out.reason = "no two-process way fits " + usable + " (" + not_fitting + "); " +
                 std::to_string(fewest_shared->encoder_parts + fewest_shared->decoder_parts) +
                 " stages taking turns do: by the estimate they need " +
                 NeedText(fewest_shared->shared_need);
    return out;
  }
  out.way = "none";
  out.reason = "nothing fits " + usable + " (" + not_fitting +
               "); the floor, one unit of one sample, is " + Gib(floor_bytes) +
               ": a smaller data.size or a larger card";
  return out;
}

PartsPlan PlanParts(const Config& c) {
  const PipelineLayout layout = ResolveLayout(c);
  const std::vector<StageCounts> enc = EncoderLevelCounts(c), dec = DecoderLevelCounts(c);
  const int64_t n = MicroBatchSamples(c);
  const int64_t m = c.train.micro_batches;
  const int64_t a = BytesPerActivation(c);
  const bool keep = c.pipeline.activations == Activations::kKeep;
  const bool blocks = c.pipeline.recompute_unit == RecomputeUnit::kBlock;
  const bool offload = c.pipeline.offload == OnOff::kOn;
  PartsPlan out;
  for (const StageSpec& spec : layout.stages) {
    (spec.encoder ? out.encoder_parts : out.decoder_parts) = spec.parts;
    StageCounts counts;
    for (int level = spec.lo; level <= spec.hi; ++level)
      counts.Merge((spec.encoder ? enc : dec)[static_cast<size_t>(level)]);
    int64_t boundary = 0;  // one micro-batch in and out, each with its gradient
    for (const StageChannel& ch : layout.channels) {
      if (ch.from != spec.index && ch.to != spec.index) continue;
      for (const WireTensor& t : ch.tensors) {
        int64_t numel = 1;
        for (int64_t d : t.shape) numel *= d;
        boundary += 2 * numel * a;
      }
    }
    StagePlan p;
    p.key = spec.Key();
    p.levels = spec.LevelsText();
    p.state_bytes = TurnStateBytes(counts);  // parked: the optimizer's state only for the step
    p.activation_bytes = keep      ? counts.activation_elements * n * a * m
                         : offload ? Unit(counts, blocks) * n * a
                                   : CheckpointedElements(counts, blocks) * n * a;
    p.boundary_bytes = boundary;
    p.workspace_bytes = 2 * counts.largest_tensor * n * a;
    p.turn_bytes =
        std::max(p.state_bytes + p.activation_bytes + p.boundary_bytes + p.workspace_bytes,
                 StateBytes(c, counts));
    p.residue_bytes = keep ? p.activation_bytes : 0;
    out.stages.push_back(p);
    // On a device of its own a stage does not park: its whole state stays.
    out.own_device_bytes =
        std::max(out.own_device_bytes,
                 StateBytes(c, counts) + p.activation_bytes + p.boundary_bytes + p.workspace_bytes);
  }
  const int64_t stages = static_cast<int64_t>(out.stages.size());
  for (const StagePlan& s : out.stages) {
    int64_t others = 0;
    for (const StagePlan& o : out.stages)
      if (&o != &s) others += o.residue_bytes;
    out.shared_device_bytes = std::max(out.shared_device_bytes, s.turn_bytes + others);
  }
  out.shared_need = NeedOnCard(out.shared_device_bytes, static_cast<int>(stages));
  out.own_need = NeedOnCard(out.own_device_bytes, 1);
  out.shared_device_bytes += stages * kContextAllowanceBytes;
  out.own_device_bytes += kContextAllowanceBytes;
  return out;
}

std::optional<PartsPlan> FewestPartsThatFit(const Config& config, int64_t usable_bytes,
                                            bool shared) {
  const int levels = Geometry(config.model).levels();
  auto peak = [shared](const PartsPlan& p) {
    return shared ? p.shared_need.total() : p.own_need.total();
  };
  // Fewest stages first; among the splits of one count, the lowest peak. The
  // encoder has L + 1 levels (0..L), the decoder L, each part at least one.
  for (int stages = 2; stages <= 2 * levels + 1; ++stages) {
    std::optional<PartsPlan> best;
    for (int encoder_parts = std::max(1, stages - levels);
         encoder_parts <= std::min(stages - 1, levels + 1); ++encoder_parts) {
      Config c = config;
      c.pipeline.encoder_parts = encoder_parts;
      c.pipeline.decoder_parts = stages - encoder_parts;
      c.pipeline.encoder_cuts.clear();
      c.pipeline.decoder_cuts.clear();
      c.pipeline.placement = PlacementKind::kListed;
      c.pipeline.devices.clear();
      c.pipeline.nodes.clear();
      const PartsPlan plan = PlanParts(c);
      if (peak(plan) <= usable_bytes && (!best || peak(plan) < peak(*best))) best = plan;
    }
    if (best) return best;
  }
  return std::nullopt;
}

}  // namespace up
