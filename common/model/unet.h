// A U-Net as levels, split into the two halves that the pipeline runs as
// separate processes. Every model kind is built as the same list of parts:
//
//   encoder levels  x -> x; level i's output is skip i (level 0 at full
//                   resolution); the last encoder level is the bottleneck;
//   decoder levels  (x, skip i) -> x, deepest first;
//   heads           x at decoder level i -> logits at that resolution; the
//                   classic U-Net has one (level 0), nnU-Net one per level
//                   (deep supervision).
//
// The encoder stage holds the encoder levels and the bottleneck, the decoder
// stage the decoder levels and the heads. Each kind's builder registers its
// modules under the names its reference uses (classic: unet.cpp;
// nnunet: nnunet_unet.cpp; torchscript: bundle_unet.cpp, the names of each
// level's file) and describes each level as a Level.
//
//   UNet: the two halves composed, with parameter names `encoder.*` and
//   `decoder.*`.
//
// 2-D (N, C, H, W) and 3-D (N, C, D, H, W) come from the same code. Each half
// seeds the global generator itself before creating its layers, so a process
// that builds only one half gets exactly the weights that UNet has for it.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/config/config.h"
#include "common/layout/model_geometry.h"

namespace up {

class ActivationOffload;

// What crosses the boundary from encoder to decoder (and, as gradients, back).
struct Boundary {
  torch::Tensor bottleneck;          // (N, 2*F[L-1], S / 2^L)
  std::vector<torch::Tensor> skips;  // skips[i]: (N, F[i], S / 2^i), i = 0..L-1
};

// Names and shapes of the boundary tensors for a micro-batch of `n` samples,
// in wire order: "bottleneck", then "skip0".."skip{L-1}".
struct BoundarySpec {
  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> shapes;
};
BoundarySpec BoundaryShapes(const ModelConfig& model, const std::vector<int>& size, int64_t n);

// One line naming every boundary tensor with its shape and dtype for a
// micro-batch of `config`, e.g. "bottleneck:2x128x4x4:f32 skip0:...": both
// stages and the launcher compare it in the handshake.
std::string BoundarySignature(const Config& config);

// The seeds each half is built from; distinct so the halves differ.
uint64_t EncoderInitSeed(uint64_t seed);
uint64_t DecoderInitSeed(uint64_t seed);

// One level: the modules it runs (whose buffers a recompute restores) and
// how it maps its inputs to its output. The modules are the owning half's.
// `blocks`, where the kind has them, are the same computation in finer units
// (classic: each conv-norm-ReLU; nnunet: each conv block or residual block,
// the decoder's upsampling and concatenation in its first): blocks[0] takes
// the level's inputs, each later block the one before's output, and the last
// block's output is run's, the same operations in the same order.
struct Level {
  std::vector<torch::nn::Module*> modules;
  std::function<torch::Tensor(const std::vector<torch::Tensor>&)> run;
  std::vector<Level> blocks{};  // empty: the kind has none
};

// What a checkpointed forward keeps and recomputes in backward: nothing
// (every activation kept), each level's inputs, or each block's
// (level_checkpoint.h). A level without blocks is recomputed whole.
enum class CheckpointUnit { kNone, kLevel, kBlock };
// `train.checkpointing` and `pipeline.recompute_unit` as a unit.
CheckpointUnit CheckpointUnitOf(Checkpointing setting);
CheckpointUnit CheckpointUnitOf(RecomputeUnit setting);

// What a pipeline part computes, by wire name (common/layout/pipeline_layout.h):
// skip{i}, bottleneck, up{i}, logits{i}.
using PartTensors = std::map<std::string, torch::Tensor>;

// How a part's input reaches the device when the level that takes it runs
// (a stage whose inputs wait in host memory: pipeline.offload); empty: the
// inputs are on the device already.
using InputMover = std::function<torch::Tensor(const torch::Tensor&)>;

class UNetEncoderImpl : public torch::nn::Module {
 public:
  UNetEncoderImpl(const ModelConfig& config, uint64_t seed);
  Boundary forward(const torch::Tensor& x);  // x: (N, in_channels, *S)

  // A pipeline part: keeps levels lo..hi only. The other levels' modules are
  // unregistered and their tensors released, so parameters(), the optimizer,
  // parking and the stage file hold this part's alone, under the names the
  // whole half gives them.
  void KeepLevels(int lo, int hi);
  // Runs the kept levels from x: the images (lo = 0) or skip{lo-1}.
  // Returns each level's output: skip{i} (N, F[i], S / scale[i]), and
  // bottleneck for level L.
  PartTensors ForwardPart(const torch::Tensor& x);
  // After KeepLevels: where each of parameters() stood in the whole half's
  // (the global gradient norm is summed in the whole model's order), and how
  // many parameters the whole half has.
  const std::vector<int>& parameter_positions() const { return parameter_positions_; }
  int whole_parameters() const { return whole_parameters_; }
  // Each level (and the bottleneck), or each block, recomputed in backward
  // (level_checkpoint.h), in forward and ForwardPart alike.
  void set_checkpointing(CheckpointUnit unit) { checkpointing_ = unit; }
  // With checkpointing, each unit's kept inputs parked in `offload`'s host
  // memory until its backward (nullptr: on the device). Not owned.
  void set_offload(ActivationOffload* offload) { offload_ = offload; }
  // ForwardPart's input goes through `mover` first.
  void set_input_mover(InputMover mover) { mover_ = std::move(mover); }

  // For builders: levels in order; the last one added is the bottleneck.
  void AddLevel(Level level) { levels_.push_back(std::move(level)); }

 private:
  CheckpointUnit checkpointing_ = CheckpointUnit::kNone;
  ActivationOffload* offload_ = nullptr;
  InputMover mover_;
  std::vector<Level> levels_;
  int lo_ = 0;  // the kept levels (KeepLevels); all by default
  int hi_ = -1;
  std::vector<int> parameter_positions_;
  int whole_parameters_ = 0;
};
TORCH_MODULE(UNetEncoder);

class UNetDecoderImpl : public torch::nn::Module {
 public:
  UNetDecoderImpl(const ModelConfig& config, uint64_t seed, bool deep_supervision = false);
  // outputs[0]: logits (N, num_classes, *S); with deep supervision then one
  // per coarser decoder level i: (N, num_classes, S / scale[i]).
  std::vector<torch::Tensor> forward(const Boundary& b);

  // A pipeline part: keeps levels lo..hi (and their heads) only; see
  // UNetEncoderImpl::KeepLevels.
  void KeepLevels(int lo, int hi);
  // Runs the kept levels, hi down to lo: `in` holds x (the bottleneck, or
  // up{hi+1}) and skip{i} for each kept level. Returns up{i}
  // (N, F[i], S / scale[i]) for each level and logits{i} for each head the
  // forward computes (level 0; every level under deep supervision).
  PartTensors ForwardPart(const PartTensors& in);
  const std::vector<int>& parameter_positions() const { return parameter_positions_; }
  int whole_parameters() const { return whole_parameters_; }
  // Each level (upsampling, concatenation, convolutions), or each block,
  // recomputed in backward; the heads are not.
  void set_checkpointing(CheckpointUnit unit) { checkpointing_ = unit; }
  void set_offload(ActivationOffload* offload) { offload_ = offload; }
  // Each of ForwardPart's inputs goes through `mover` as its level starts.
  void set_input_mover(InputMover mover) { mover_ = std::move(mover); }

  // For builders: decoder level i (consuming skip i) and its head, given for
  // i = L-1 down to 0; a head with no `run` is not computed.
  void SetLevel(int i, Level level, Level head);

 private:
  CheckpointUnit checkpointing_ = CheckpointUnit::kNone;
  ActivationOffload* offload_ = nullptr;
  InputMover mover_;
  bool deep_supervision_ = false;
  std::vector<Level> levels_;  // levels_[i]: (below, skip i) -> x_i
  std::vector<Level> heads_;   // heads_[i]: x_i -> logits at level i
  int lo_ = 0;                 // the kept levels (KeepLevels); all by default
  int hi_ = -1;
  std::vector<int> parameter_positions_;
  int whole_parameters_ = 0;
};
TORCH_MODULE(UNetDecoder);

// The halves of `config`'s model (kind, deep supervision) for a stage.
UNetEncoder MakeEncoder(const Config& config);
UNetDecoder MakeDecoder(const Config& config);
// A pipeline part's: the whole half, built as MakeEncoder/MakeDecoder build
// it (the same weights), then pruned to levels lo..hi (KeepLevels).
UNetEncoder MakeEncoderPart(const Config& config, int lo, int hi);
UNetDecoder MakeDecoderPart(const Config& config, int lo, int hi);

class UNetImpl : public torch::nn::Module {
 public:
  UNetImpl(const ModelConfig& config, uint64_t seed, bool deep_supervision = false);
  std::vector<torch::Tensor> forward(const torch::Tensor& x) {
    return decoder->forward(encoder->forward(x));
  }

  UNetEncoder encoder{nullptr};
  UNetDecoder decoder{nullptr};
};
TORCH_MODULE(UNet);

// Parameters and buffers of `module`, sorted by name: the order of digests,
// checkpoints and recordings.
std::vector<std::pair<std::string, torch::Tensor>> NamedState(const torch::nn::Module& module);

// How many parameter elements `module` has (its own and its children's).
int64_t ParameterCount(const torch::nn::Module& module);

}  // namespace up
