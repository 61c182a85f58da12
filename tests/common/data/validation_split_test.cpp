// data.validation: a seeded share or named cases held out, the same in every
// process, disjoint from the training cases that LoadMicroBatch visits; the
// validation set's plan batches a micro-batch's worth of windows; counts per
// case and region from predicted and reference classes.
#include "common/data/validation_split.h"

#include <gtest/gtest.h>

#include <set>

#include "common/base/errors.h"
#include "common/model/loss.h"

namespace up {
namespace {

Config Synthetic(int samples) {
  Config c;
  c.data.samples = samples;
  c.data.size = {16, 16};
  c.train.batch_size = 4;
  c.train.micro_batches = 2;
  return c;
}

TEST(SplitCases, ASeededShareDisjointFromTraining) {
  Config c = Synthetic(10);
  c.data.validation = 0.2;
  const std::unique_ptr<Dataset> whole = MakeWholeDataset(c);
  const CaseSplit a = SplitCases(*whole, c.data, 0);
  EXPECT_EQ(a.validation.size(), 2u);
  EXPECT_EQ(a.train.size(), 8u);
  std::set<int64_t> all(a.train.begin(), a.train.end());
  all.insert(a.validation.begin(), a.validation.end());
  EXPECT_EQ(all.size(), 10u);
  EXPECT_EQ(SplitCases(*whole, c.data, 0).validation, a.validation);  // a pure function
  bool differs = false;
  for (uint64_t seed = 1; seed < 8; ++seed)
    differs |= SplitCases(*whole, c.data, seed).validation != a.validation;
  EXPECT_TRUE(differs);  // the seed chooses
  c.data.validation = 0.01;
  EXPECT_EQ(SplitCases(*whole, c.data, 0).validation.size(), 1u);  // at least one
}

TEST(SplitCases, NamedCasesAndTheTrainingSubset) {
  Config c = Synthetic(5);
  c.data.validation_cases = {"sample_0003", "sample_0001"};
  const std::unique_ptr<Dataset> whole = MakeWholeDataset(c);
  const CaseSplit s = SplitCases(*whole, c.data, 0);
  EXPECT_EQ(s.validation, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(s.train, (std::vector<int64_t>{0, 2, 4}));
  const std::unique_ptr<Dataset> train = MakeDataset(c);
  ASSERT_EQ(train->size(), 3);
  EXPECT_EQ(train->CaseName(1), "sample_0002");
  EXPECT_TRUE(torch::equal(train->Get(1).image, whole->Get(2).image));
  const std::unique_ptr<Dataset> val = MakeValidationDataset(c);
  ASSERT_EQ(val->size(), 2);
  EXPECT_EQ(val->CaseName(1), "sample_0003");

  c.data.validation_cases = {"sample_0009"};
  EXPECT_THROW(SplitCases(*whole, c.data, 0), UsageError);
  c.data.validation_cases = {"sample_0001", "sample_0001"};
  EXPECT_THROW(SplitCases(*whole, c.data, 0), UsageError);
  c.data.validation_cases.clear();
  c.data.validation = 0.95;
  EXPECT_THROW(SplitCases(*whole, c.data, 0), UsageError);
}

TEST(ValidationSet, PlanOfMicroBatchSizedCallsAndNoSetWithoutValidation) {
  Config c = Synthetic(6);
  EXPECT_EQ(MakeValidationSet(c), nullptr);
  c.data.validation = 0.5;
  const std::unique_ptr<ValidationSet> v = MakeValidationSet(c);
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->batch, 2);
  EXPECT_EQ(v->cases->size(), 3);
  ASSERT_EQ(v->plan.size(), 3u);  // samples are one window each
  EXPECT_TRUE(v->plan[2].last);
  EXPECT_EQ(v->entries.size(), 2u);  // classes 1, 2; no regions without BraTS labels
  EXPECT_THROW(v->Batch(3), RuntimeError);
}

TEST(ValidationCounts, TruePositivesFalsePositivesFalseNegativesPerEntry) {
  const torch::Tensor pred = torch::tensor({0, 1, 1, 2, 3, 3}, torch::kInt64);
  const torch::Tensor truth = torch::tensor({0, 1, 2, 2, 3, 0}, torch::kInt64);
  const std::vector<int64_t> c = ValidationCounts(pred, truth, ValidationEntries(4, true));
  // class 1: TP 1 FP 1 FN 0; class 2: TP 1 FP 0 FN 1; class 3: TP 1 FP 1 FN 0;
  // wt (1,2,3): TP 4 FP 1 FN 0; tc (1,3): TP 2 FP 2 FN 0; et (3): as class 3.
  EXPECT_EQ(c, (std::vector<int64_t>{1, 1, 0, 1, 0, 1, 1, 1, 0, 4, 1, 0, 2, 2, 0, 1, 1, 0}));
}

}  // namespace
}  // namespace up
