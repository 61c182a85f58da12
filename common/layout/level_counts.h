// What each level of a U-Net holds, counted from the config alone: its
// parameters and buffers (exact), and the activations autograd keeps for one
// sample (an estimate with stated parts). `plan` (launcher/tools/memory_plan.h)
// sums them per stage; the pipeline's balanced cuts (pipeline_layout.h) weigh
// the levels with them. Torch-free.
//
// The activation model: per double convolution at width F over V voxels,
// ~4*F*V (norm inputs, ReLU outputs) plus its input; per decoder level the
// upsampled tensor and the 2F-wide concatenation (model.memory: lean, none:
// the first conv saves the upsampled tensor and the skip as they are);
// max-pool indices (int64, counted as two floats); a head's logits and
// softmax. nnU-Net's blocks are counted as dynamic_network_architectures
// builds them (memory_plan.h).
#pragma once

#include <cstdint>
#include <vector>

#include "common/config/config.h"

namespace up {

struct StageCounts {
  int64_t parameters = 0;
  int64_t buffer_elements = 0;
  int64_t activation_elements = 0;  // per sample, kept for the backward
  int64_t largest_tensor = 0;       // per sample, elements
  // Checkpointing (level_checkpoint.h), per sample: what it keeps, each
  // level's inputs (`checkpoint_elements`) or each block's
  // (`block_checkpoint_elements`), and the one unit it rebuilds at a time,
  // the largest level's activations (its inputs included) or the largest
  // block's (what its graph saves, inputs included, and the gradient entering
  // it: an input nothing saves goes once the block is rebuilt). A kind
  // without blocks counts each level as its one block.
  int64_t checkpoint_elements = 0;
  int64_t block_checkpoint_elements = 0;
  int64_t largest_level = 0;
  int64_t largest_block = 0;
  // The most a block's backward holds at once, per sample: at its start
  // (what its graph saved, the gradient entering it and the one its last
  // operation makes) or in a convolution's backward (ConvBackward in
  // level_counts.cpp). 0 where no block was counted.
  int64_t largest_backward = 0;
  // Adds `o`'s counts to these (the largest tensor, level and block are the
  // larger of the two).
  void Merge(const StageCounts& o);
};

// Encoder levels 0..L (L: the bottleneck), each with what runs inside it
// (the pooling before level i > 0 is level i's).
std::vector<StageCounts> EncoderLevelCounts(const Config& config);
// Decoder levels by U-Net index i = 0..L-1 (the level consuming skip i),
// each with its head; level 0 holds the classic U-Net's one head.
std::vector<StageCounts> DecoderLevelCounts(const Config& config);

// The levels summed: a whole half.
StageCounts EncoderCounts(const Config& config);
StageCounts DecoderCounts(const Config& config);

// Weights, gradients and optimizer state (Adam 2x, SGD with momentum 1x)
// plus buffers, in bytes (fp32).
int64_t StateBytes(const Config& config, const StageCounts& counts);
// What of it a parked stage holds through its turn's forward and backward:
// weights, gradients and buffers (the optimizer's state comes only for the
// step: stage_parking.h).
int64_t TurnStateBytes(const StageCounts& counts);
// Bytes per activation element: 4 in fp32, 2 under bf16 or fp16 autocast.
int BytesPerActivation(const Config& config);

// The floor of any way that keeps units whole, in bytes: the most the
// largest unit's forward and backward hold at once for one sample. For a
// kind with blocks, the largest block's backward (largest_backward: the
// moment its widest convolution's backward holds that convolution's input,
// both gradients and the kernel's copies for the weight gradient); for a
// kind without, the largest level's activations and a workspace of twice its
// largest tensor.
int64_t FloorBytes(const Config& config);

// Voxels of a tensor at per-axis downsampling `scale` of data.size, and at
// the classic U-Net's level `level` (data.size / 2^level).
int64_t VoxelsAt(const Config& config, const std::vector<int>& scale);
int64_t VoxelsAtLevel(const Config& config, int level);

}  // namespace up
