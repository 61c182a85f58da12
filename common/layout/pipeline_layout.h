// The stages of a pipeline and what flows between them (issue 16): a pure
// function of the config, computed alike by the launcher and every stage.
//
// Stages in pipeline order: the encoder's parts, then the decoder's. An
// encoder part runs U-Net levels lo..hi (level L is the bottleneck), a
// decoder part its levels hi..lo (deepest first), each with its head. The
// cuts come from pipeline.cuts, or else balance each part's estimated peak
// (common/layout/level_counts.h: state plus kept activations).
//
// What flows, per micro-batch, named as on the wire:
//   skip{i}      encoder level i's output: to the decoder part that runs
//                level i, and (as its input) to the encoder part that runs
//                level i + 1 when that is another part;
//   bottleneck   to the decoder part that runs level L-1;
//   up{i}        decoder level i's output, to the part that runs level i-1;
//   logits{i}    a head's output (level 0; every level under deep
//                supervision), to the last stage, which computes the loss.
// Each pair of stages that exchange tensors has one channel: its forward
// message carries all of them in a fixed order (bottleneck, up, skips,
// logits; ascending), and its backward message their gradients in the same
// order. Nothing is relayed through a stage in between. With one part each,
// this is the two-stage pipeline: one channel, "bottleneck skip0 .. skip{L-1}".
// Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/config/config.h"

namespace up {

struct StageSpec {
  bool encoder = true;
  int index = 0;  // in pipeline order
  int part = 0;   // within its half, 0-based
  int parts = 1;  // its half's parts
  int lo = 0;     // its lowest U-Net level
  int hi = 0;     // its highest (encoder: L is the bottleneck)
  std::string device = "cpu";
  std::string device_key;  // the key it comes from, for messages: pipeline.devices[2]
  int node = 0;

  // "encoder", "decoder" with one part; "encoder2", "decoder3" (1-based)
  // otherwise: stage files, logs, the handshake.
  std::string Key() const;
  // "encoder", or "decoder part 2 of 3": messages.
  std::string Name() const;
  // "levels 0-1", "levels 3-2": the levels in the order the part runs them.
  std::string LevelsText() const;
};

struct WireTensor {
  std::string name;            // skip3, bottleneck, up2, logits1
  std::vector<int64_t> shape;  // for one micro-batch: (n, C, *S / scale)
};

struct StageChannel {
  int from = 0;  // producer (forward direction); always before `to`
  int to = 0;
  std::vector<WireTensor> tensors;  // forward order; the gradients come back in it
};

struct PipelineLayout {
  int levels = 0;  // L: skips (the decoder's levels)
  std::vector<StageSpec> stages;
  std::vector<StageChannel> channels;  // by (from, to)
  std::vector<int> encoder_cuts;       // resolved: where each encoder part after the first starts
  std::vector<int> decoder_cuts;       // resolved, in the decoder's run order (0: level L-1)

  int size() const { return static_cast<int>(stages.size()); }
  bool two_stage() const { return stages.size() == 2; }
  // Channels into / out of stage `s`, ordered by the other end.
  std::vector<const StageChannel*> Into(int s) const;
  std::vector<const StageChannel*> OutOf(int s) const;
  // Which stage runs encoder level `level` / decoder level `level`.
  int EncoderStageOf(int level) const;
  int DecoderStageOf(int level) const;
  // The name of the tensor stage `s` takes as its input ("" for stage 0: the images).
  std::string InputName(int s) const;
};

// The shared-memory ring of `channel` in one direction, for a run whose
// names begin with `prefix`: "PREFIX-0to2-fwd", "PREFIX-0to2-bwd".
std::string ChannelRingName(const std::string& prefix, const StageChannel& channel, bool forward);

// The stage index of part `part` (0-based) of the encoder or decoder;
// UsageError naming `flag` when the half has no such part.
int StageIndexOf(const PipelineLayout& layout, bool encoder, int part, const std::string& flag);

// The layout of `config` for micro-batches of `config`'s size. UsageError
// ("config: pipeline.cuts.encoder = [..]: ...") for parts or cuts the model
// cannot take, or device and node lists of the wrong length.
// `replica` (pipeline.replicas): that copy's devices. The config places
// replica 0; replica r's CPU stages stay on the CPU and a stage on cuda:N
// moves to cuda:(N + r*D), D one past the highest CUDA index replica 0 uses
// (two stages taking turns on cuda:0: replica r on cuda:r; on cuda:0 and
// cuda:1: replica 1 on cuda:2 and cuda:3).
PipelineLayout ResolveLayout(const Config& config, int replica = 0);

// pipeline.replicas over `nnodes` machines: replica r runs on nodes of its
// own when the replicas divide the nodes (nnodes / replicas each), else
// replicas / nnodes whole replicas share each node. Its slot is its place
// among the replicas of its node (the `replica` ResolveLayout takes for its
// devices): 0 with nodes of its own; on one machine, r itself. Counts that
// do not divide each other give the one-machine answers (the placement
// refuses them: ResolveReplicaPlacement).
int ReplicaSlot(int replicas, int nnodes, int replica);
// The first node of replica `replica`, and how many nodes each replica
// spans (0 when neither count divides the other).
int ReplicaFirstNode(int replicas, int nnodes, int replica);
int ReplicaNodes(int replicas, int nnodes);

// A stage's key in replica `replica`: "encoder" in replica 0 (the run's
// files are replica 0's), "encoder.r1", "decoder2.r3" in the others (logs,
// the handshake, test hooks).
std::string ReplicaKey(const std::string& stage_key, int replica);

}  // namespace up
