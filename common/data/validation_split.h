// The validation cases (data.validation) and the cases left for training.
//
//   data.validation: 0.2        a seeded share of the cases (train.seed):
//                               round(0.2 * N), at least one, never all
//   data.validation: [a, b]     these cases, by name (Dataset::CaseName)
//
// The split is a pure function of (case names, data.validation, seed), so
// every process (the encoder, the decoder, the single-process trainer, the
// launcher) holds out the same cases. Training visits only the rest; the
// sample order (LoadMicroBatch) runs over them as over a smaller dataset.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/config/config.h"
#include "common/data/dataset.h"
#include "common/layout/window_grid.h"
#include "common/run/val_metrics.h"

namespace up {

struct CaseSplit {
  std::vector<int64_t> train;       // ascending indices into the whole dataset
  std::vector<int64_t> validation;  // ascending
};

// UsageError naming data.validation for a case it names that the dataset
// lacks (or names twice), or a split that leaves no case to train on.
CaseSplit SplitCases(const Dataset& whole, const DataConfig& data, uint64_t seed);

// Some cases of a dataset, renumbered 0..n-1; forwards everything else.
class SubsetDataset : public Dataset {
 public:
  SubsetDataset(std::shared_ptr<const Dataset> whole, std::vector<int64_t> indices);
  int64_t size() const override { return static_cast<int64_t>(indices_.size()); }
  Sample Get(int64_t index) const override { return whole_->Get(At(index)); }
  Sample GetParts(int64_t index, SampleParts parts) const override {
    return whole_->GetParts(At(index), parts);
  }
  bool WholeCases() const override { return whole_->WholeCases(); }
  std::string CaseName(int64_t index) const override { return whole_->CaseName(At(index)); }
  std::vector<int64_t> SpatialShape(int64_t index) const override {
    return whole_->SpatialShape(At(index));
  }
  std::vector<int64_t> LabelValues() const override { return whole_->LabelValues(); }

 private:
  int64_t At(int64_t index) const { return indices_.at(static_cast<size_t>(index)); }
  std::shared_ptr<const Dataset> whole_;
  std::vector<int64_t> indices_;
};

// `whole` without the validation cases (itself when there are none).
std::unique_ptr<Dataset> TrainingCases(std::unique_ptr<Dataset> whole, const Config& config);

// The validation cases of data.kind's dataset; null without data.validation.
std::unique_ptr<Dataset> MakeValidationDataset(const Config& config);

// Every case's spatial size, in order (what ValidationPlan takes).
std::vector<std::vector<int64_t>> CaseShapes(const Dataset& data);

// What every process of a run holds of the validation: the cases, the plan
// of window batches over them (windows of data.size at validate.overlap,
// as many a batch as a micro-batch has samples, so a batch crosses the
// stage boundary in the shapes training uses), and what each case is
// scored on (the classes; BraTS labels add the regions).
struct ValidationSet {
  std::unique_ptr<Dataset> cases;
  std::vector<ValidationBatch> plan;
  std::vector<ValidationEntry> entries;
  int64_t batch = 0;  // windows a network call (the micro-batch size)

  // The plan's batch `index`; RuntimeError when out of range.
  const ValidationBatch& Batch(int64_t index) const;
};
// Null without data.validation.
std::unique_ptr<ValidationSet> MakeValidationSet(const Config& config);

}  // namespace up
