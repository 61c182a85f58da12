// Loss and Dice; see loss.h.
#include "common/model/loss.h"

#include "common/layout/model_geometry.h"

#include "common/base/errors.h"

namespace up {

namespace {

// nnU-Net's MemoryEfficientSoftDiceLoss (smooth 1e-5) of probabilities
// `prob` against `onehot`, both (N, K, *S), every channel counted.
torch::Tensor SoftDice(const torch::Tensor& prob, const torch::Tensor& onehot,
                       const LossSpec& spec) {
  std::vector<int64_t> spatial;
  for (int64_t d = 2; d < prob.dim(); ++d) spatial.push_back(d);
  torch::Tensor inter = (prob * onehot).sum(spatial);  // (N, K)
  torch::Tensor pred = prob.sum(spatial);              // (N, K)
  torch::Tensor gt = onehot.sum(spatial);              // (N, K)
  if (spec.batch_dice) {
    inter = inter.sum(0);
    pred = pred.sum(0);
    gt = gt.sum(0);
  }
  const double smooth = 1e-5;
  torch::Tensor dice = (2 * inter + smooth) / torch::clamp_min(gt + pred + smooth, 1e-8);
  return -dice.mean();
}

// The soft Dice term of one output. logits: (N, K, *S); target: (N, *S).
torch::Tensor DiceTerm(const torch::Tensor& logits, const torch::Tensor& target,
                       const LossSpec& spec) {
  const int64_t k = logits.size(1);
  torch::Tensor prob = torch::softmax(logits, 1);                                    // (N, K, *S)
  torch::Tensor onehot = torch::one_hot(target, k).movedim(-1, 1).to(prob.dtype());  // (N, K, *S)
  std::vector<int64_t> spatial;
  for (int64_t d = 2; d < logits.dim(); ++d) spatial.push_back(d);
  if (!spec.nnunet) {  // the classic form, kept as it was
    std::vector<int64_t> reduce{0};
    reduce.insert(reduce.end(), spatial.begin(), spatial.end());
    torch::Tensor inter = (prob * onehot).sum(reduce);       // (K)
    torch::Tensor denom = (prob + onehot).sum(reduce);       // (K)
    torch::Tensor dice = (2 * inter + 1.0) / (denom + 1.0);  // (K)
    return 1 - dice.slice(0, 1).mean();
  }
  // MemoryEfficientSoftDiceLoss(batch_dice, smooth=1e-5, do_bg=False).
  return SoftDice(prob.slice(1, 1), onehot.slice(1, 1), spec);
}

// Whether each voxel of `target` (N, *S) is in each region: (N, R, *S)
// bool, as batchgeneratorsv2's ConvertSegmentationToRegionsTransform.
torch::Tensor RegionTargets(const torch::Tensor& target,
                            const std::vector<std::vector<int>>& regions) {
  std::vector<torch::Tensor> maps;
  for (const std::vector<int>& r : regions) {
    const torch::Tensor members = torch::tensor(std::vector<int64_t>(r.begin(), r.end()),
                                                target.options().dtype(torch::kInt64));
    maps.push_back(torch::isin(target, members));
  }
  return torch::stack(maps, 1);
}

}  // namespace

LossSpec MakeLossSpec(const Config& config) {
  LossSpec spec;
  spec.kind = config.train.loss;
  spec.batch_dice = config.train.batch_dice;
  spec.nnunet = config.model.kind == ModelKind::kNnunet;
  spec.regions = config.model.regions;
  if (config.train.deep_supervision) {
    const int outputs = Geometry(config.model).levels();  // one per decoder level
    spec.weights.clear();
    double sum = 0;
    for (int i = 0; i < outputs; ++i) {
      const double w = i + 1 == outputs && outputs > 1 ? 0.0 : 1.0 / static_cast<double>(1 << i);
      spec.weights.push_back(w);
      sum += w;
    }
    for (double& w : spec.weights) w /= sum;
  }
  return spec;
}

torch::Tensor SegmentationLoss(const std::vector<torch::Tensor>& outputs,
                               const torch::Tensor& target, const LossSpec& spec) {
  if (outputs.size() != spec.weights.size())
    throw RuntimeError("loss: " + std::to_string(outputs.size()) + " outputs for " +
                       std::to_string(spec.weights.size()) + " deep-supervision weights");
  torch::Tensor total;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (spec.weights[i] == 0.0) continue;  // nnU-Net skips these too
    const torch::Tensor& logits = outputs[i];
    torch::Tensor t = target;  // (N, *S_i)
    // 'nearest-exact' by an integer factor f picks voxel i*f + f/2 of each block.
    for (int64_t d = 2; d < logits.dim(); ++d) {
      const int64_t f = target.size(d - 1) / logits.size(d);
      if (f > 1) t = t.slice(d - 1, f / 2, c10::nullopt, f);
    }
    torch::Tensor loss;
    if (spec.regions.empty()) {
      loss = torch::nn::functional::cross_entropy(logits, t);
      if (spec.kind == LossKind::kCeDice) loss = loss + DiceTerm(logits, t, spec);
    } else {
      const torch::Tensor regions =
          RegionTargets(t, spec.regions).to(logits.dtype());  // (N, R, *S)
      loss = torch::binary_cross_entropy_with_logits(logits, regions);
      if (spec.kind == LossKind::kCeDice)
        loss = loss + SoftDice(torch::sigmoid(logits), regions, spec);
    }
    if (outputs.size() > 1) loss = loss * spec.weights[i];
    total = total.defined() ? total + loss : loss;
  }
  return total;
}

torch::Tensor PredictedClasses(const torch::Tensor& logits, const ModelConfig& model) {
  torch::NoGradGuard no_grad;
  if (model.regions.empty()) return logits.argmax(1);
  const torch::Tensor in = torch::sigmoid(logits.to(torch::kFloat32)) > 0.5;  // (N, R, *S)
  torch::Tensor classes = torch::zeros_like(logits.select(1, 0), torch::kInt64);
  for (size_t r = 0; r < model.regions.size(); ++r)
    classes.masked_fill_(in.select(1, static_cast<int64_t>(r)), model.regions_class_order[r]);
  return classes;
}

DiceCounter::DiceCounter(const ModelConfig& model)
    : num_classes_(model.regions.empty() ? model.num_classes
                                         : static_cast<int>(model.regions.size()) + 1),
      regions_(model.regions),
      counts_(3 * num_classes_, 0) {}

void DiceCounter::Add(const torch::Tensor& logits, const torch::Tensor& target) {
  torch::NoGradGuard no_grad;
  const torch::Tensor pred = regions_.empty() ? logits.argmax(1) : torch::sigmoid(logits) > 0.5;
  const torch::Tensor in_region =
      regions_.empty() ? torch::Tensor() : RegionTargets(target, regions_);  // (N, R, *S)
  for (int c = 1; c < num_classes_; ++c) {
    const torch::Tensor p = regions_.empty() ? pred == c : pred.select(1, c - 1);
    const torch::Tensor t = regions_.empty() ? target == c : in_region.select(1, c - 1);
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

std::vector<int64_t> ValidationCounts(const torch::Tensor& pred, const torch::Tensor& truth,
                                      const std::vector<ValidationEntry>& entries) {
  torch::NoGradGuard no_grad;
  const torch::Tensor p = pred.to(torch::kCPU), t = truth.to(torch::kCPU);
  std::vector<int64_t> out;
  for (const ValidationEntry& e : entries) {
    const torch::Tensor members = torch::tensor(e.classes, torch::kInt64);
    const torch::Tensor in_p = torch::isin(p, members), in_t = torch::isin(t, members);
    const int64_t tp = (in_p & in_t).sum().item<int64_t>();
    out.push_back(tp);
    out.push_back(in_p.sum().item<int64_t>() - tp);
    out.push_back(in_t.sum().item<int64_t>() - tp);
  }
  return out;
}

}  // namespace up
