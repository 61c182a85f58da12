// Loss and Dice; see loss.h.
#include "common/model/loss.h"

#include "common/errors.h"

namespace up {

torch::Tensor SegmentationLoss(const torch::Tensor& logits, const torch::Tensor& target,
                               const std::string& kind) {
  torch::Tensor loss = torch::nn::functional::cross_entropy(logits, target);
  if (kind == "ce_dice") {
    const int64_t k = logits.size(1);
    torch::Tensor prob = torch::softmax(logits, 1);                                    // (N, K, *S)
    torch::Tensor onehot = torch::one_hot(target, k).movedim(-1, 1).to(prob.dtype());  // (N, K, *S)
    std::vector<int64_t> reduce{0};
    for (int64_t d = 2; d < logits.dim(); ++d) reduce.push_back(d);
    torch::Tensor inter = (prob * onehot).sum(reduce);       // (K)
    torch::Tensor denom = (prob + onehot).sum(reduce);       // (K)
    torch::Tensor dice = (2 * inter + 1.0) / (denom + 1.0);  // (K)
    loss = loss + (1 - dice.slice(0, 1).mean());
  }
  return loss;
}

DiceCounter::DiceCounter(int num_classes)
    : num_classes_(num_classes), counts_(3 * num_classes, 0) {}

void DiceCounter::Add(const torch::Tensor& logits, const torch::Tensor& target) {
  torch::NoGradGuard no_grad;
  torch::Tensor pred = logits.argmax(1);  // (N, *S)
  for (int c = 1; c < num_classes_; ++c) {
    torch::Tensor p = pred == c;
    torch::Tensor t = target == c;
    counts_[3 * c] += (p & t).sum().item<int64_t>();
    counts_[3 * c + 1] += p.sum().item<int64_t>();
    counts_[3 * c + 2] += t.sum().item<int64_t>();
  }
}

void DiceCounter::AddCounts(const std::vector<int64_t>& counts) {
  if (counts.size() != counts_.size())
    throw RuntimeError("DiceCounter: count vector of the wrong size");
  for (size_t i = 0; i < counts.size(); ++i) counts_[i] += counts[i];
}

double DiceCounter::Mean() const {
  double sum = 0;
  for (int c = 1; c < num_classes_; ++c) {
    const int64_t denom = counts_[3 * c + 1] + counts_[3 * c + 2];
    sum += denom == 0 ? 1.0 : 2.0 * counts_[3 * c] / denom;
  }
  return sum / (num_classes_ - 1);
}

}  // namespace up
