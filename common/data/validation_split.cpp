// See validation_split.h.
#include "common/data/validation_split.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "common/base/errors.h"
#include "common/data/counter_random.h"
#include "common/data/nifti_dataset.h"
#include "common/nnunet/nnunet_layout.h"

namespace up {

namespace {

// data.kind = nnunet: the fold's lists in splits_final.json, by name.
CaseSplit NnunetSplit(const Dataset& whole, const DataConfig& data) {
  const std::string splits = data.dataset + "/splits_final.json";
  const NnunetFold fold = ReadNnunetFold(splits, data.fold);
  std::map<std::string, int64_t> by_name;
  for (int64_t i = 0; i < whole.size(); ++i) by_name[whole.CaseName(i)] = i;
  CaseSplit split;
  for (const auto& [names, into] :
       {std::pair{&fold.train, &split.train}, std::pair{&fold.val, &split.validation}}) {
    for (const std::string& name : *names) {
      auto it = by_name.find(name);
      if (it == by_name.end()) {
        throw UsageError("data.fold = " + data.fold + ": '" + splits + "' names case '" + name +
                         "', which the preprocessed data lacks; preprocess it again "
                         "(nnUNetv2_plan_and_preprocess) or fix the split");
      }
      into->push_back(it->second);
    }
    std::sort(into->begin(), into->end());
  }
  if (split.train.empty())
    throw UsageError("data.fold = " + data.fold + ": '" + splits + "' leaves no case to train on");
  return split;
}

}  // namespace

CaseSplit SplitCases(const Dataset& whole, const DataConfig& data, uint64_t seed) {
  if (data.kind == DataKind::kNnunet) return NnunetSplit(whole, data);
  const int64_t n = whole.size();
  std::vector<bool> held(static_cast<size_t>(n), false);
  if (!data.validation_cases.empty()) {
    std::map<std::string, int64_t> by_name;
    for (int64_t i = 0; i < n; ++i) by_name[whole.CaseName(i)] = i;
    for (const std::string& name : data.validation_cases) {
      auto it = by_name.find(name);
      if (it == by_name.end()) {
        throw UsageError("data.validation names case '" + name +
                         "', which data.path = " + data.path + " does not have (it has " +
                         std::to_string(n) + " cases, the first '" + whole.CaseName(0) +
                         "'); list names of its cases or give a share like 0.2");
      }
      if (held[static_cast<size_t>(it->second)])
        throw UsageError("data.validation names case '" + name + "' twice; list it once");
      held[static_cast<size_t>(it->second)] = true;
    }
  } else if (data.validation > 0) {
    const int64_t count =
        std::max<int64_t>(1, std::llround(data.validation * static_cast<double>(n)));
    if (count >= n) {
      throw UsageError("data.validation = " + std::to_string(data.validation) + " holds out " +
                       std::to_string(count) + " of the dataset's " + std::to_string(n) +
                       " cases, leaving none to train on; give a smaller share or more cases");
    }
    // The first `count` of a permutation seeded by train.seed alone.
    const std::vector<int64_t> order = SeededPermutation(n, seed ^ 0x5851F42D4C957F2DULL);
    for (int64_t i = 0; i < count; ++i)
      held[static_cast<size_t>(order[static_cast<size_t>(i)])] = true;
  }
  CaseSplit split;
  for (int64_t i = 0; i < n; ++i)
    (held[static_cast<size_t>(i)] ? split.validation : split.train).push_back(i);
  if (split.train.empty()) {
    throw UsageError("data.validation holds out all " + std::to_string(n) +
                     " cases, leaving none to train on; list fewer cases");
  }
  return split;
}

SubsetDataset::SubsetDataset(std::shared_ptr<const Dataset> whole, std::vector<int64_t> indices)
    : whole_(std::move(whole)), indices_(std::move(indices)) {}

std::unique_ptr<Dataset> TrainingCases(std::unique_ptr<Dataset> whole, const Config& config) {
  if (!config.data.HasValidation()) return whole;
  CaseSplit split = SplitCases(*whole, config.data, config.train.seed);
  return std::make_unique<SubsetDataset>(std::shared_ptr<const Dataset>(std::move(whole)),
                                         std::move(split.train));
}

std::unique_ptr<Dataset> MakeValidationDataset(const Config& config) {
  if (!config.data.HasValidation()) return nullptr;
  std::shared_ptr<const Dataset> whole = MakeWholeDataset(config);
  CaseSplit split = SplitCases(*whole, config.data, config.train.seed);
  return std::make_unique<SubsetDataset>(std::move(whole), std::move(split.validation));
}

const ValidationBatch& ValidationSet::Batch(int64_t index) const {
  if (index < 0 || index >= static_cast<int64_t>(plan.size())) {
    throw RuntimeError("validation batch " + std::to_string(index) + " is not in the plan of " +
                       std::to_string(plan.size()) + " batches");
  }
  return plan[static_cast<size_t>(index)];
}

std::unique_ptr<ValidationSet> MakeValidationSet(const Config& config) {
  std::unique_ptr<Dataset> cases = MakeValidationDataset(config);
  if (!cases) return nullptr;
  auto set = std::make_unique<ValidationSet>();
  set->batch = MicroBatchSamples(config);
  set->plan = ValidationPlan(CaseShapes(*cases),
                             std::vector<int64_t>(config.data.size.begin(), config.data.size.end()),
                             config.validate.overlap, set->batch);
  set->entries =
      !config.model.regions.empty()
          ? RegionEntries(config.model.regions)
          : ValidationEntries(config.model.num_classes, config.model.num_classes == 4 &&
                                                            cases->LabelValues() == kBratsLabels);
  set->cases = std::move(cases);
  return set;
}

std::vector<std::vector<int64_t>> CaseShapes(const Dataset& data) {
  std::vector<std::vector<int64_t>> out;
  for (int64_t i = 0; i < data.size(); ++i) out.push_back(data.SpatialShape(i));
  return out;
}

}  // namespace up
