// See pipeline_layout.h.
#include "common/layout/pipeline_layout.h"

#include <algorithm>
#include <cstdlib>
#include <map>

#include "common/base/errors.h"
#include "common/layout/level_counts.h"
#include "common/layout/level_partition.h"
#include "common/layout/model_geometry.h"

namespace up {
namespace {

std::string List(const std::vector<int>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

// What a level costs a stage at its peak: its state, and the activations it
// keeps (every micro-batch with keep under the sequential schedule, one with
// recompute).
int64_t LevelCost(const Config& c, const StageCounts& level) {
  const int64_t n = MicroBatchSamples(c);
  const int64_t kept = c.pipeline.activations == Activations::kKeep ? c.train.micro_batches : 1;
  return StateBytes(c, level) + level.activation_elements * n * BytesPerActivation(c) * kept;
}

// Where wire tensors sort within a message: bottleneck, up, skip, logits.
int Category(const std::string& name) {
  if (name == "bottleneck") return 0;
  if (name.rfind("up", 0) == 0) return 1;
  if (name.rfind("skip", 0) == 0) return 2;
  return 3;
}

int IndexOf(const std::string& name) {
  const size_t digit = name.find_first_of("0123456789");
  return digit == std::string::npos ? -1 : std::stoi(name.substr(digit));
}

}  // namespace

std::string StageSpec::Key() const {
  const char* half = encoder ? "encoder" : "decoder";
  return parts == 1 ? half : half + std::to_string(part + 1);
}

std::string StageSpec::Name() const {
  const char* half = encoder ? "encoder" : "decoder";
  return parts == 1 ? half
                    : std::string(half) + " part " + std::to_string(part + 1) + " of " +
                          std::to_string(parts);
}

std::string StageSpec::LevelsText() const {
  const int first = encoder ? lo : hi, last = encoder ? hi : lo;
  return first == last ? "level " + std::to_string(first)
                       : "levels " + std::to_string(first) + "-" + std::to_string(last);
}

std::vector<const StageChannel*> PipelineLayout::Into(int s) const {
  std::vector<const StageChannel*> out;
  for (const StageChannel& c : channels)
    if (c.to == s) out.push_back(&c);
  return out;
}

std::vector<const StageChannel*> PipelineLayout::OutOf(int s) const {
  std::vector<const StageChannel*> out;
  for (const StageChannel& c : channels)
    if (c.from == s) out.push_back(&c);
  return out;
}

int PipelineLayout::EncoderStageOf(int level) const {
  for (const StageSpec& s : stages)
    if (s.encoder && s.lo <= level && level <= s.hi) return s.index;
  throw RuntimeError("no encoder part runs level " + std::to_string(level));
}

int PipelineLayout::DecoderStageOf(int level) const {
  for (const StageSpec& s : stages)
    if (!s.encoder && s.lo <= level && level <= s.hi) return s.index;
  throw RuntimeError("no decoder part runs level " + std::to_string(level));
}

std::string PipelineLayout::InputName(int s) const {
  const StageSpec& spec = stages[static_cast<size_t>(s)];
  if (spec.encoder) return spec.lo == 0 ? "" : "skip" + std::to_string(spec.lo - 1);
  return spec.hi == levels - 1 ? "bottleneck" : "up" + std::to_string(spec.hi + 1);
}

std::string ChannelRingName(const std::string& prefix, const StageChannel& channel, bool forward) {
  return prefix + "-" + std::to_string(channel.from) + "to" + std::to_string(channel.to) +
         (forward ? "-fwd" : "-bwd");
}

int StageIndexOf(const PipelineLayout& layout, bool encoder, int part, const std::string& flag) {
  int parts = 0;
  for (const StageSpec& s : layout.stages) {
    if (s.encoder != encoder) continue;
    parts = s.parts;
    if (s.part == part) return s.index;
  }
  throw UsageError(
      flag + " " + std::to_string(part + 1) + ": the " + (encoder ? "encoder" : "decoder") +
      " has " + std::to_string(parts) + (parts == 1 ? " part" : " parts") + " (pipeline." +
      (encoder ? "encoder" : "decoder") + "_parts); give 1 to " + std::to_string(parts));
}

int ReplicaNodes(int replicas, int nnodes) {
  if (nnodes % replicas == 0) return nnodes / replicas;
  return replicas % nnodes == 0 ? 1 : 0;
}

int ReplicaFirstNode(int replicas, int nnodes, int replica) {
  if (nnodes % replicas == 0) return replica * (nnodes / replicas);
  return replicas % nnodes == 0 ? replica / (replicas / nnodes) : 0;
}

int ReplicaSlot(int replicas, int nnodes, int replica) {
  if (nnodes % replicas == 0) return 0;
  return replicas % nnodes == 0 ? replica % (replicas / nnodes) : replica;
}

std::string ReplicaKey(const std::string& stage_key, int replica) {
  return replica == 0 ? stage_key : stage_key + ".r" + std::to_string(replica);
}

namespace {

// The encoder's cuts: given, or balanced (mirrored: over levels 0..L-1, the
// bottleneck joining the last part, so every part has skips to mirror).
std::vector<int> EncoderCuts(const Config& c, int L, int K, bool mirrored) {
  const PipelineConfig& p = c.pipeline;
  if (!p.encoder_cuts.empty()) return p.encoder_cuts;
  if (K <= 1) return {};
  std::vector<int64_t> cost;
  for (const StageCounts& l : EncoderLevelCounts(c)) cost.push_back(LevelCost(c, l));
  if (mirrored && L >= 1) {
    cost[static_cast<size_t>(L - 1)] += cost.back();
    cost.pop_back();
  }
  return BalancedCuts(cost, K,
                      mirrored ? "config: pipeline.encoder_parts (mirrored: the bottleneck shares "
                                 "level " +
                                     std::to_string(L - 1) + "'s part)"
                               : "config: pipeline.encoder_parts");
}

// The decoder's cuts, in run order (position q runs level L-1-q): given,
// mirrored from the encoder's parts, or balanced.
std::vector<int> DecoderCuts(const Config& c, int L, int K, int KD, bool mirrored,
                             const std::vector<PartRange>& enc_parts) {
  const PipelineConfig& p = c.pipeline;
  if (!p.decoder_cuts.empty()) return p.decoder_cuts;
  std::vector<int> cuts;
  if (mirrored) {
    if (KD != K) {
      throw UsageError("config: pipeline.placement = \"mirrored\": pipeline.decoder_parts (" +
                       std::to_string(KD) + ") must equal pipeline.encoder_parts (" +
                       std::to_string(K) + "), each decoder part beside its encoder part");
    }
    // Decoder part j mirrors encoder part K-1-j: it runs that part's skip levels.
    for (int j = 1; j < K; ++j) {
      const PartRange& e = enc_parts[static_cast<size_t>(K - j)];  // the part before in run order
      cuts.push_back(L - e.first);
    }
  } else if (KD > 1) {
    const std::vector<StageCounts> dec_counts = DecoderLevelCounts(c);
    std::vector<int64_t> cost;
    for (int q = 0; q < L; ++q)
      cost.push_back(LevelCost(c, dec_counts[static_cast<size_t>(L - 1 - q)]));
    cuts = BalancedCuts(cost, KD, "config: pipeline.decoder_parts");
  }
  return cuts;
}

// The stages in pipeline order: the encoder's parts, then the decoder's.
std::vector<StageSpec> PartStages(int L, const std::vector<PartRange>& enc_parts,
                                  const std::vector<PartRange>& dec_parts) {
  const int K = static_cast<int>(enc_parts.size()), KD = static_cast<int>(dec_parts.size());
  std::vector<StageSpec> stages;
  for (int e = 0; e < K; ++e) {
    StageSpec s;
    s.encoder = true;
    s.index = e;
    s.part = e;
    s.parts = K;
    s.lo = enc_parts[static_cast<size_t>(e)].first;
    s.hi = s.lo + enc_parts[static_cast<size_t>(e)].count - 1;
    stages.push_back(s);
  }
  for (int d = 0; d < KD; ++d) {
    StageSpec s;
    s.encoder = false;
    s.index = K + d;
    s.part = d;
    s.parts = KD;
    const PartRange& r = dec_parts[static_cast<size_t>(d)];
    s.hi = L - 1 - r.first;
    s.lo = s.hi - r.count + 1;
    stages.push_back(s);
  }
  return stages;
}

// Placement: pipeline.devices / pipeline.nodes (one per stage; mirrored: the
// encoder parts' K), else the two-stage keys; replica r's CUDA stages move up
// by the devices one replica takes.
void PlaceStages(const PipelineConfig& p, int K, bool mirrored, int replica, PipelineLayout* out) {
  const size_t want = mirrored ? static_cast<size_t>(K) : out->stages.size();
  const char* how = mirrored
                        ? "one per encoder part (pipeline.placement = \"mirrored\" puts each "
                          "decoder part beside the encoder part whose largest skip it takes)"
                        : "one per stage in pipeline order (encoder parts, then decoder parts)";
  if (!p.devices.empty() && p.devices.size() != want) {
    throw UsageError("config: pipeline.devices has " + std::to_string(p.devices.size()) +
                     " entries, expected " + std::to_string(want) + ": " + how);
  }
  if (!p.nodes.empty() && p.nodes.size() != want) {
    throw UsageError("config: pipeline.nodes has " + std::to_string(p.nodes.size()) +
                     " entries, expected " + std::to_string(want) + ": " + how);
  }
  for (StageSpec& s : out->stages) {
    // Mirrored: a decoder part sits with the encoder part that makes its
    // largest skip (its lowest level's).
    const int from = mirrored && !s.encoder ? out->EncoderStageOf(s.lo) : s.index;
    const bool as_encoder = out->stages[static_cast<size_t>(from)].encoder;
    s.device = !p.devices.empty() ? p.devices[static_cast<size_t>(from)]
               : as_encoder       ? p.encoder.device
                                  : p.decoder.device;
    s.device_key = !p.devices.empty() ? "pipeline.devices[" + std::to_string(from) + "]"
                   : as_encoder       ? "pipeline.stages.encoder.device"
                                      : "pipeline.stages.decoder.device";
    s.node = !p.nodes.empty() ? p.nodes[static_cast<size_t>(from)]
             : as_encoder     ? p.encoder.node
                              : p.decoder.node;
  }
  if (replica > 0) {  // CUDA stages move up by the devices one replica takes
    auto cuda_index = [](const std::string& d) -> int {
      if (d.rfind("cuda", 0) != 0) return -1;
      return d.size() > 5 ? std::atoi(d.c_str() + 5) : 0;
    };
    int span = 0;
    for (const StageSpec& s : out->stages) span = std::max(span, cuda_index(s.device) + 1);
    for (StageSpec& s : out->stages) {
      const int index = cuda_index(s.device);
      if (index >= 0) s.device = "cuda:" + std::to_string(index + replica * span);
    }
  }
}

// The channels: every tensor by its producer and consumers, one channel per
// pair of stages, each channel's tensors in a fixed order.
std::vector<StageChannel> WireChannels(const Config& c, const LevelGeometry& g,
                                       const PipelineLayout& out) {
  const int L = g.levels();
  const int S = out.size();
  const int64_t n = MicroBatchSamples(c);
  auto shape = [&](int level, int64_t channels) {
    std::vector<int64_t> sh{n, channels};
    for (size_t d = 0; d < c.data.size.size(); ++d)
      sh.push_back(c.data.size[d] / g.scale[static_cast<size_t>(level)][d]);
    return sh;
  };
  std::map<std::pair<int, int>, std::vector<WireTensor>> flows;
  auto flow = [&](int from, int to, WireTensor t) {
    if (from != to) flows[{from, to}].push_back(std::move(t));
  };
  for (int i = 0; i < L; ++i) {
    const WireTensor skip{"skip" + std::to_string(i), shape(i, g.skip_channels[i])};
    const int producer = out.EncoderStageOf(i);
    flow(producer, out.DecoderStageOf(i), skip);
    flow(producer, out.EncoderStageOf(i + 1), skip);
  }
  flow(out.EncoderStageOf(L), out.DecoderStageOf(L - 1),
       {"bottleneck", shape(L, g.bottleneck_channels)});
  for (int i = 1; i < L; ++i) {
    flow(out.DecoderStageOf(i), out.DecoderStageOf(i - 1),
         {"up" + std::to_string(i), shape(i, g.decoder_channels[static_cast<size_t>(i)])});
  }
  // The heads the loss weighs: level 0, and under deep supervision every
  // level but the lowest resolution (nnU-Net weighs that one 0: loss.h).
  for (int i = 0; i < L; ++i) {
    const bool weighed = i == 0 || (c.train.deep_supervision && (i + 1 < L || L == 1));
    if (!g.head[static_cast<size_t>(i)] || !weighed) continue;
    flow(out.DecoderStageOf(i), S - 1,
         {"logits" + std::to_string(i), shape(i, c.model.num_classes)});
  }
  std::vector<StageChannel> channels;
  for (auto& [ends, tensors] : flows) {
    std::sort(tensors.begin(), tensors.end(), [](const WireTensor& a, const WireTensor& b) {
      return std::make_pair(Category(a.name), IndexOf(a.name)) <
             std::make_pair(Category(b.name), IndexOf(b.name));
    });
    channels.push_back({ends.first, ends.second, std::move(tensors)});
  }
  return channels;
}

}  // namespace

PipelineLayout ResolveLayout(const Config& c, int replica) {
  const PipelineConfig& p = c.pipeline;
  const LevelGeometry g = Geometry(c.model);
  const int L = g.levels();
  const bool mirrored = p.placement == PlacementKind::kMirrored;
  PipelineLayout out;
  out.levels = L;
  const int K = std::max(1, p.encoder_parts), KD = std::max(1, p.decoder_parts);
  out.encoder_cuts = EncoderCuts(c, L, K, mirrored);
  const std::vector<PartRange> enc_parts = PartsFromCuts(
      L + 1, out.encoder_cuts, "config: pipeline.cuts.encoder = " + List(out.encoder_cuts));
  out.decoder_cuts = DecoderCuts(c, L, K, KD, mirrored, enc_parts);
  const std::vector<PartRange> dec_parts = PartsFromCuts(
      L, out.decoder_cuts,
      "config: pipeline.cuts.decoder = " + List(out.decoder_cuts) +
          " (decoder levels in the order they run, 0 = level " + std::to_string(L - 1) + ")");
  if (static_cast<int>(enc_parts.size()) != K || static_cast<int>(dec_parts.size()) != KD) {
    throw UsageError("config: pipeline.cuts = {encoder: " + List(out.encoder_cuts) +
                     ", decoder: " + List(out.decoder_cuts) + "} makes " +
                     std::to_string(enc_parts.size()) + " and " + std::to_string(dec_parts.size()) +
                     " parts, but pipeline.encoder_parts and pipeline.decoder_parts are " +
                     std::to_string(K) + " and " + std::to_string(KD) +
                     "; give one cut fewer than parts (or leave the parts out)");
  }
  out.stages = PartStages(L, enc_parts, dec_parts);
  PlaceStages(p, K, mirrored, replica, &out);
  out.channels = WireChannels(c, g, out);
  return out;
}

}  // namespace up
