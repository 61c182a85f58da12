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
// (a bad case) is thrown by the Get that needs that batch.
//
// LoadAhead(k, hold) is for a pipeline stage off its turn, with 0 workers:
// the stage's thread would otherwise wait for the other stage's turn doing
// nothing, then load its own batches at the start of its turn while the
// device idles. It loads the next k micro-batches Get will be asked for (up
// to the run's last step) on the caller's thread and keeps them, each
// passed through `hold` (on a CPU device the stage moves them out of the
// device's count: host memory until Get). A load that fails is left to Get,
// which loads again and throws. Get and LoadAhead are called from one
// thread; the destructor stops and joins the workers.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "common/config/config.h"
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
  // Off turn: the next `count` micro-batches loaded now (no-op with
  // workers, which load ahead already). Returns how many it loaded.
  int LoadAhead(int count, const std::function<void(MicroBatch*)>& hold);
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
  int64_t last_position_ = -1;           // the furthest position Get handed over
  const int64_t end_position_;           // the run's last step's last micro-batch, plus one
  std::map<int64_t, MicroBatch> ahead_;  // LoadAhead's, by position, until Get takes them
};

}  // namespace up
