// Micro-batches prepared ahead of the trainer on background threads
// (data.workers), in the order a process asks for them: the encoder its
// images, the decoder its masks, the single-process trainer both.
//
// LoadMicroBatch is a pure function of (seed, step, micro-batch), so a batch
// made ahead is exactly the one the caller would have made; each worker runs
// LibTorch with train.threads intra-op threads, as the trainer's own thread
// does (a new thread would otherwise get OpenMP's default team and split
// float reductions, the augmentations' means, differently). With 0 workers
// Get loads on the caller's thread.
//
// Get(step, m) hands over the batch and queues the next `2 * workers`
// positions (m + 1, ..., then the next step's); the time Get spends waiting
// (or loading, with 0 workers) is what the step lost to data, read with
// TakeWaitSeconds and shown in a trace as "data wait". A worker's error
// (a bad case) is thrown by the Get that needs that batch. Get is called
// from one thread; the destructor stops and joins the workers.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "common/config.h"
#include "common/data/dataset.h"

namespace up {

class BatchLoader {
 public:
  // `data` must outlive the loader. `replica`: the pipeline replica whose
  // micro-batches Get(step, m) returns (its m-th is the batch's
  // replica*micro_batches + m); -1: the whole batch's, m < BatchMicroBatches
  // (the single-process trainer).
  BatchLoader(const Dataset& data, const Config& config, SampleParts parts, int replica = -1);
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  MicroBatch Get(int64_t step, int micro_batch);
  // Seconds Get waited since the last call.
  double TakeWaitSeconds();

 private:
  void Work();
  void Queue(int64_t position);  // with mutex_ held

  const Dataset& data_;
  const Config config_;
  const SampleParts parts_;
  const int micro_batches_;  // a step's, as Get counts them
  const int first_;          // the batch's micro-batch Get's 0 is
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::deque<int64_t> queue_;                                // positions to load, in order
  std::map<int64_t, std::shared_future<MicroBatch>> ready_;  // step * M + m -> its batch
  std::map<int64_t, std::promise<MicroBatch>> promised_;     // queued or loading
  std::vector<std::thread> workers_;
  double wait_s_ = 0;
  int64_t last_position_ = -1;  // the furthest position Get handed over
};

}  // namespace up
