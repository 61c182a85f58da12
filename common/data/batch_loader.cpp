// See batch_loader.h.
#include "common/data/batch_loader.h"

#include <algorithm>
#include <chrono>
#include <iterator>

#include "common/base/trace.h"

namespace up {

BatchLoader::BatchLoader(const Dataset& data, const Config& config, SampleParts parts, int replica)
    : data_(data),
      config_(config),
      parts_(parts),
      micro_batches_(replica < 0 ? BatchMicroBatches(config) : config.train.micro_batches),
      first_(replica < 0 ? 0 : replica * config.train.micro_batches),
      end_position_(static_cast<int64_t>(config.train.steps) * micro_batches_) {
  for (int i = 0; i < config.data.workers; ++i) workers_.emplace_back([this] { Work(); });
}

BatchLoader::~BatchLoader() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void BatchLoader::Queue(int64_t position) {
  if (ready_.count(position)) return;
  std::promise<MicroBatch>& p = promised_[position];
  ready_[position] = p.get_future().share();
  queue_.push_back(position);
}

void BatchLoader::Work() {
  at::set_num_threads(config_.train.threads);  // this thread's team, as the trainer's
  for (;;) {
    int64_t position;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      position = queue_.front();
      queue_.pop_front();
    }
    try {
      MicroBatch b = LoadMicroBatch(data_, config_, position / micro_batches_,
                                    first_ + static_cast<int>(position % micro_batches_), parts_);
      std::lock_guard<std::mutex> lock(mutex_);
      promised_[position].set_value(std::move(b));
      promised_.erase(position);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      promised_[position].set_exception(std::current_exception());
      promised_.erase(position);
    }
  }
}

MicroBatch BatchLoader::Get(int64_t step, int micro_batch) {
  const auto start = std::chrono::steady_clock::now();
  TraceSpan span("data wait", "data");
  MicroBatch batch;
  const int64_t position = step * micro_batches_ + micro_batch;
  if (auto it = ahead_.find(position); it != ahead_.end()) {  // loaded off turn
    batch = std::move(it->second);
    ahead_.erase(ahead_.begin(), std::next(it));
    last_position_ = std::max(last_position_, position);
  } else if (workers_.empty() || position <= last_position_) {  // no workers, or asked again
    batch = LoadMicroBatch(data_, config_, step, first_ + micro_batch, parts_);
    if (workers_.empty()) {
      ahead_.clear();  // a jump (a resumed run): what lay ahead is not next
      last_position_ = std::max(last_position_, position);
    }
  } else {
    last_position_ = position;
    std::shared_future<MicroBatch> wanted;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      // Whatever lies behind (a resumed run, a repeated step) is dropped.
      ready_.erase(ready_.begin(), ready_.lower_bound(position));
      for (int64_t p = position; p <= position + 2 * static_cast<int64_t>(workers_.size()); ++p)
        Queue(p);
      wanted = ready_.at(position);
      ready_.erase(position);
    }
    wake_.notify_all();
    batch = wanted.get();  // rethrows a worker's error
  }
  wait_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return batch;
}

int BatchLoader::LoadAhead(int count, const std::function<void(MicroBatch*)>& hold) {
  if (!workers_.empty()) return 0;
  TraceSpan span(trace_event::kLoadAhead, "data");
  int loaded = 0;
  for (int64_t p = last_position_ + 1; p <= last_position_ + count && p < end_position_; ++p) {
    if (ahead_.count(p)) continue;
    MicroBatch b;
    try {
      b = LoadMicroBatch(data_, config_, p / micro_batches_,
                         first_ + static_cast<int>(p % micro_batches_), parts_);
    } catch (const std::exception&) {
      return loaded;  // Get loads it again, and throws there
    }
    hold(&b);
    ahead_.emplace(p, std::move(b));
    ++loaded;
  }
  return loaded;
}

double BatchLoader::TakeWaitSeconds() {
  const double s = wait_s_;
  wait_s_ = 0;
  return s;
}

}  // namespace up
