// See memory_plan.h.
#include "launcher/tools/memory_plan.h"

#include <algorithm>
#include <cmath>

#include "common/errors.h"
#include "common/model_geometry.h"
#include "common/pipeline_layout.h"

namespace up {

std::vector<PlanRow> PlanMemory(const Config& c, int64_t budget) {
  const StageCounts enc = EncoderCounts(c), dec = DecoderCounts(c);
  const int64_t n = c.train.batch_size / c.train.micro_batches;  // samples per micro-batch
  const int64_t m = c.train.micro_batches;
  const int64_t a = BytesPerActivation(c);
  const LevelGeometry g = Geometry(c.model);
  int64_t boundary = g.bottleneck_channels * VoxelsAt(c, g.scale.back());
  for (int i = 0; i < g.levels(); ++i) boundary += g.skip_channels[i] * VoxelsAt(c, g.scale[i]);
  const int64_t boundary_bytes = boundary * n * a;

  std::vector<PlanRow> rows;
  PlanRow single{"single-process", "forward+backward of one micro-batch"};
  single.state_bytes = StateBytes(c, enc) + StateBytes(c, dec);
  single.activation_bytes = (enc.activation_elements + dec.activation_elements) * n * a;
  single.workspace_bytes = 2 * std::max(enc.largest_tensor, dec.largest_tensor) * n * a;
  single.context_bytes = kContextAllowanceBytes;
  rows.push_back(single);

  // Checkpointing per level keeps each level's input (about the boundary:
  // the skips and the bottleneck, and the decoder levels' outputs of the same
  // sizes) and recomputes one level at a time: the largest is the decoder's
  // full-resolution level (its 2F-wide concatenation, two F-wide convs).
  PlanRow ckpt{"single-process checkpointing", "backward of the full-resolution level"};
  ckpt.state_bytes = single.state_bytes;
  ckpt.activation_bytes = 2 * boundary_bytes + 7 * g.skip_channels[0] * VoxelsAtLevel(c, 0) * n * a;
  ckpt.workspace_bytes = single.workspace_bytes;
  ckpt.context_bytes = kContextAllowanceBytes;
  rows.push_back(ckpt);

  for (const char* policy : {"keep", "recompute"}) {
    const bool keep = std::string(policy) == "keep";
    // Encoder turns: its state, its activations (all micro-batches with keep,
    // one at a time with recompute), the boundary it writes out.
    const int64_t enc_acts = enc.activation_elements * n * a * (keep ? m : 1);
    const int64_t enc_turn =
        StateBytes(c, enc) + enc_acts + boundary_bytes + 2 * enc.largest_tensor * n * a;
    // Decoder turn: its state and one micro-batch's activations, the boundary
    // and its gradients on the device; with keep, the encoder's kept
    // activations stay on the device too (autograd's saved tensors cannot be parked).
    const int64_t kept_from_encoder = keep ? enc.activation_elements * n * a * m : 0;
    const int64_t dec_turn = StateBytes(c, dec) + dec.activation_elements * n * a +
                             kept_from_encoder + 2 * boundary_bytes +
                             2 * dec.largest_tensor * n * a;
    PlanRow row{std::string("pipeline ") + policy,
                dec_turn >= enc_turn ? "decoder turn" : "encoder turn"};
    const bool dec_peak = dec_turn >= enc_turn;
    row.state_bytes = dec_peak ? StateBytes(c, dec) : StateBytes(c, enc);
    row.activation_bytes =
        dec_peak ? dec.activation_elements * n * a + kept_from_encoder : enc_acts;
    row.boundary_bytes = dec_peak ? 2 * boundary_bytes : boundary_bytes;
    row.workspace_bytes = 2 * (dec_peak ? dec.largest_tensor : enc.largest_tensor) * n * a;
    row.context_bytes = 2 * kContextAllowanceBytes;  // two processes, two contexts
    rows.push_back(row);
  }
  for (PlanRow& r : rows) {
    r.peak_bytes =
        r.state_bytes + r.activation_bytes + r.boundary_bytes + r.workspace_bytes + r.context_bytes;
    r.fits = r.peak_bytes <= budget;
  }
  return rows;
}

PartsPlan PlanParts(const Config& c) {
  const PipelineLayout layout = ResolveLayout(c);
  const std::vector<StageCounts> enc = EncoderLevelCounts(c), dec = DecoderLevelCounts(c);
  const int64_t n = c.train.batch_size / c.train.micro_batches;
  const int64_t m = c.train.micro_batches;
  const int64_t a = BytesPerActivation(c);
  const bool keep = c.pipeline.activations == "keep";
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
    p.state_bytes = StateBytes(c, counts);
    p.activation_bytes = counts.activation_elements * n * a * (keep ? m : 1);
    p.boundary_bytes = boundary;
    p.workspace_bytes = 2 * counts.largest_tensor * n * a;
    p.turn_bytes = p.state_bytes + p.activation_bytes + p.boundary_bytes + p.workspace_bytes;
    p.residue_bytes = keep ? p.activation_bytes : 0;
    out.stages.push_back(p);
  }
  const int64_t stages = static_cast<int64_t>(out.stages.size());
  for (const StagePlan& s : out.stages) {
    int64_t others = 0;
    for (const StagePlan& o : out.stages)
      if (&o != &s) others += o.residue_bytes;
    out.shared_device_bytes = std::max(out.shared_device_bytes, s.turn_bytes + others);
    out.own_device_bytes = std::max(out.own_device_bytes, s.turn_bytes);
  }
  out.shared_device_bytes += stages * kContextAllowanceBytes;
  out.own_device_bytes += kContextAllowanceBytes;
  return out;
}

std::optional<PartsPlan> FewestPartsThatFit(const Config& config, int64_t budget, bool shared) {
  const int levels = Geometry(config.model).levels();
  auto peak = [shared](const PartsPlan& p) {
    return shared ? p.shared_device_bytes : p.own_device_bytes;
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
      c.pipeline.placement = "listed";
      c.pipeline.devices.clear();
      c.pipeline.nodes.clear();
      const PartsPlan plan = PlanParts(c);
      if (peak(plan) <= budget && (!best || peak(plan) < peak(*best))) best = plan;
    }
    if (best) return best;
  }
  return std::nullopt;
}

}  // namespace up
