// Segmentation loss and the Dice metric, shared by the reference trainer and
// the decoder stage so both compute them with the same operations in the same
// order (a requirement for bit-identical training).
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "common/config/config.h"
#include "common/run/val_metrics.h"

namespace up {

// What the loss is, from the config.
struct LossSpec {
  LossKind kind = LossKind::kCe;
  bool batch_dice = true;  // Dice over the whole batch, else per sample, then the mean
  // nnU-Net's soft Dice (MemoryEfficientSoftDiceLoss): smoothing 1e-5 and
  // loss = ce - dice, the numbers nnU-Net logs. Otherwise smoothing 1 and
  // loss = ce + 1 - dice.
  bool nnunet = false;
  // One weight per decoder output, full resolution first: {1} without deep
  // supervision; with it nnU-Net's 1/2^i, the lowest resolution 0, summing to 1.
  std::vector<double> weights{1.0};
  // Region-based (model.regions): output r against "the target is one of
  // regions[r]", binary cross-entropy with logits plus nnU-Net's soft Dice on
  // sigmoids over every region (DC_and_BCE_loss). Empty: the classes.
  std::vector<std::vector<int>> regions;
};
LossSpec MakeLossSpec(const Config& config);

// The weighted sum over `outputs` (outputs[i]: (N, K, *S_i)) of the loss
// against `target` (N, *S) int64, downsampled to each S_i by nearest
// neighbour ('nearest-exact', as nnU-Net's DownsampleSegForDSTransform).
// Per output: mean cross-entropy over voxels, plus (kind "ce_dice") the soft
// Dice term over the foreground classes; with regions, binary cross-entropy
// and the soft Dice over the regions.
torch::Tensor SegmentationLoss(const std::vector<torch::Tensor>& outputs,
                               const torch::Tensor& target, const LossSpec& spec);

// The class of every voxel from logits (N, K, *S): their argmax, or with
// model.regions each region's sigmoid over 0.5 painting its class of
// regions_class_order, in order (as nnU-Net's LabelManager): (N, *S) int64.
torch::Tensor PredictedClasses(const torch::Tensor& logits, const ModelConfig& model);

// Hard Dice over foreground classes (or regions), accumulated over the
// micro-batches of a step: Add() counts, Mean() = mean over classes 1..K-1
// (regions 1..R) of 2|P∩T| / (|P|+|T|), one absent from both counting as 1.
class DiceCounter {
 public:
  explicit DiceCounter(const ModelConfig& model);
  void Add(const torch::Tensor& logits, const torch::Tensor& target);
  double Mean() const;
  // Raw counts (intersection, predicted, target per class) for transport.
  const std::vector<int64_t>& counts() const { return counts_; }
  void AddCounts(const std::vector<int64_t>& counts);

 private:
  int num_classes_;                        // entries + 1 (entry 0 unused)
  std::vector<std::vector<int>> regions_;  // empty: classes
  std::vector<int64_t> counts_;            // 3 per class
};

// A validation case's counts for ScoreValidation (common/run/val_metrics.h):
// TP, FP, FN of each entry (a class, or a region: a union of classes), for
// the predicted classes `pred` against the reference `truth`, both (*S) int64.
std::vector<int64_t> ValidationCounts(const torch::Tensor& pred, const torch::Tensor& truth,
                                      const std::vector<ValidationEntry>& entries);

}  // namespace up
