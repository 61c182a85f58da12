// data.workers: micro-batches made ahead on background threads are bit for
// bit the ones the trainer's own thread makes (augmented, with two intra-op
// threads, so a worker on OpenMP's default team would differ in the
// reductions), in any order a process asks for them; a worker's error
// reaches the Get that needs the batch; waits are counted.
#include "common/data/batch_loader.h"

#include <gtest/gtest.h>

#include <map>
#include <utility>

#include "common/base/errors.h"

namespace up {
namespace {

Config Augmented(int workers) {
  Config c;
  c.model.dims = 3;
  c.model.in_channels = 2;
  c.model.features = {8, 16};
  c.data.size = {12, 16, 16};
  c.data.samples = 7;
  c.data.augment = AugmentationNames();
  c.data.workers = workers;
  c.train.batch_size = 4;
  c.train.micro_batches = 2;
  c.train.threads = 2;
  c.train.seed = 11;
  return c;
}

TEST(BatchLoader, WorkersHandOverExactlyTheBatchesOfTheTrainersThread) {
  at::set_num_threads(2);
  const Config c = Augmented(3);
  const std::unique_ptr<Dataset> data = MakeDataset(c);
  BatchLoader loader(*data, c, SampleParts::kBoth);
  for (int64_t step = 0; step < 4; ++step) {
    for (int mb = 0; mb < 2; ++mb) {
      const MicroBatch got = loader.Get(step, mb);
      const MicroBatch want = LoadMicroBatch(*data, c, step, mb);
      EXPECT_TRUE(torch::equal(got.images, want.images)) << "step " << step << " mb " << mb;
      EXPECT_TRUE(torch::equal(got.masks, want.masks));
    }
  }
  // Jumping ahead (a resumed run) and asking again both work.
  EXPECT_TRUE(torch::equal(loader.Get(9, 1).images, LoadMicroBatch(*data, c, 9, 1).images));
  EXPECT_TRUE(torch::equal(loader.Get(9, 1).images, LoadMicroBatch(*data, c, 9, 1).images));
  EXPECT_GE(loader.TakeWaitSeconds(), 0.0);
  EXPECT_EQ(loader.TakeWaitSeconds(), 0.0);  // taken
}

TEST(BatchLoader, OnlyThePartAskedForAndTheTimeSpentWithoutWorkers) {
  const Config c = Augmented(0);
  const std::unique_ptr<Dataset> data = MakeDataset(c);
  BatchLoader loader(*data, c, SampleParts::kImages);
  const MicroBatch b = loader.Get(0, 1);
  EXPECT_TRUE(b.images.defined());
  EXPECT_GT(loader.TakeWaitSeconds(), 0.0);  // loading on this thread is waiting
}

// A dataset whose fourth sample is bad, as a case with a NaN would be.
class Failing : public Dataset {
 public:
  explicit Failing(std::unique_ptr<Dataset> inner) : inner_(std::move(inner)) {}
  int64_t size() const override { return inner_->size(); }
  Sample Get(int64_t index) const override {
    if (index == 3) throw UsageError("case 3 is bad");
    return inner_->Get(index);
  }

 private:
  std::unique_ptr<Dataset> inner_;
};

TEST(BatchLoader, AWorkersErrorIsThrownByTheGetThatNeedsIt) {
  const Config c = Augmented(2);
  Failing data(MakeDataset(c));
  BatchLoader loader(data, c, SampleParts::kBoth);
  bool thrown = false;
  for (int64_t step = 0; step < 4 && !thrown; ++step) {
    for (int mb = 0; mb < 2 && !thrown; ++mb) {
      try {
        loader.Get(step, mb);
      } catch (const UsageError& e) {
        EXPECT_STREQ(e.what(), "case 3 is bad");
        thrown = true;
      }
    }
  }
  EXPECT_TRUE(thrown);  // 4 steps of 4 samples visit every one of the 7
}

}  // namespace
}  // namespace up

namespace up {
namespace {

// pipeline.replicas: replica r's m-th micro-batch is the batch's
// r * micro_batches + m, and the whole-batch loader (single-process) counts
// every replica's.
TEST(BatchLoader, ReplicasTakeTheirShareOfEachBatch) {
  at::set_num_threads(2);
  Config c = Augmented(1);
  c.train.batch_size = 8;  // 2 replicas x 2 micro-batches x 2 samples
  c.pipeline.replicas = 2;
  const std::unique_ptr<Dataset> data = MakeDataset(c);
  BatchLoader whole(*data, c, SampleParts::kBoth);
  BatchLoader second(*data, c, SampleParts::kImages, 1);
  for (int64_t step = 0; step < 2; ++step) {
    for (int m = 0; m < 2; ++m) {
      const MicroBatch want = LoadMicroBatch(*data, c, step, 2 + m);
      EXPECT_EQ(want.images.size(0), 2);
      EXPECT_TRUE(torch::equal(second.Get(step, m).images, want.images));
    }
    for (int g = 0; g < 4; ++g)
      EXPECT_TRUE(
          torch::equal(whole.Get(step, g).images, LoadMicroBatch(*data, c, step, g).images));
  }
}

}  // namespace
}  // namespace up

namespace up {
namespace {

// A pipeline stage off its turn loads its next micro-batches (LoadAhead);
// Get then hands over exactly those, each as `hold` left it, never past the
// run's last step; a jump back loads again; a bad sample is left to the Get
// that needs it.
TEST(BatchLoader, LoadAheadHandsOverWhatItLoadedUpToTheLastStep) {
  at::set_num_threads(2);
  Config c = Augmented(0);
  c.train.steps = 3;  // 6 micro-batches in all
  const std::unique_ptr<Dataset> data = MakeDataset(c);
  BatchLoader loader(*data, c, SampleParts::kImages);
  // The storage each held batch has now, kept alive here so that no later
  // load can be given a freed batch's address and pass for a held one.
  std::map<const void*, torch::Tensor> held;
  auto hold = [&](MicroBatch* b) {
    b->images = b->images.clone();
    held[b->images.data_ptr()] = b->images;
  };
  EXPECT_TRUE(torch::equal(loader.Get(0, 0).images, LoadMicroBatch(*data, c, 0, 0).images));
  EXPECT_EQ(loader.LoadAhead(2, hold), 2);  // (0, 1) and (1, 0)
  EXPECT_EQ(loader.LoadAhead(2, hold), 0);  // loaded already
  for (auto [step, mb] : {std::pair<int64_t, int>{0, 1}, {1, 0}}) {
    const MicroBatch got = loader.Get(step, mb);
    EXPECT_TRUE(torch::equal(got.images, LoadMicroBatch(*data, c, step, mb).images));
    EXPECT_EQ(held.count(got.images.data_ptr()), 1u) << "step " << step << " mb " << mb;
  }
  EXPECT_EQ(loader.LoadAhead(10, hold), 3);  // (1, 1), (2, 0), (2, 1): the last step's
  EXPECT_EQ(loader.LoadAhead(10, hold), 0);
  // Asked for an earlier one (a resumed run): loaded here, and what lay ahead is dropped.
  EXPECT_TRUE(torch::equal(loader.Get(0, 0).images, LoadMicroBatch(*data, c, 0, 0).images));
  const MicroBatch again = loader.Get(1, 1);
  EXPECT_TRUE(torch::equal(again.images, LoadMicroBatch(*data, c, 1, 1).images));
  EXPECT_EQ(held.count(again.images.data_ptr()), 0u);

  // With workers, they load ahead already.
  BatchLoader threaded(*data, Augmented(1), SampleParts::kImages);
  EXPECT_EQ(threaded.LoadAhead(2, hold), 0);

  // A bad case stops loading ahead; the Get that needs it throws.
  struct AllBad : Dataset {
    int64_t size() const override { return 4; }
    Sample Get(int64_t) const override { throw UsageError("case is bad"); }
  } bad;
  BatchLoader failing(bad, c, SampleParts::kImages);
  EXPECT_EQ(failing.LoadAhead(2, hold), 0);
  EXPECT_THROW(failing.Get(0, 0), UsageError);
}

}  // namespace
}  // namespace up
