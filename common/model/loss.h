// Segmentation loss and the Dice metric, shared by the reference trainer and
// the decoder stage so both compute them with the same operations in the same
// order (a requirement for bit-identical training).
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

namespace up {

// Mean cross-entropy over voxels, plus (kind "ce_dice") 1 - soft Dice over
// the foreground classes. logits: (N, K, *S); target: (N, *S) int64.
torch::Tensor SegmentationLoss(const torch::Tensor& logits, const torch::Tensor& target,
                               const std::string& kind);

// Hard Dice over foreground classes, accumulated over the micro-batches of a
// step: Add() counts, Mean() = mean over classes 1..K-1 of 2|P∩T| / (|P|+|T|),
// a class absent from both counting as 1.
class DiceCounter {
 public:
  explicit DiceCounter(int num_classes);
  void Add(const torch::Tensor& logits, const torch::Tensor& target);
  double Mean() const;
  // Raw counts (intersection, predicted, target per class) for transport.
  const std::vector<int64_t>& counts() const { return counts_; }
  void AddCounts(const std::vector<int64_t>& counts);

 private:
  int num_classes_;
  std::vector<int64_t> counts_;  // 3 per class
};

}  // namespace up
