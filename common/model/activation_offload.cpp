// See activation_offload.h.
#include "common/model/activation_offload.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "common/base/trace.h"

namespace up {

ActivationOffload::ActivationOffload(const torch::Device& device)
    : device_(device), stream_(device) {}

torch::Tensor ActivationOffload::Acquire(const torch::Tensor& like) {
  auto free = pool_.find({like.scalar_type(), like.sizes().vec()});
  if (free != pool_.end() && !free->second.empty()) {
    torch::Tensor t = std::move(free->second.back());
    free->second.pop_back();
    return t;
  }
  return EmptyHostLike(like);  // pinned with a GPU; outside the accounting on a CPU
}

void ActivationOffload::WaitForCopiesOut() {
  if (copying_out_.empty()) return;
  stream_.Synchronize();
  copying_out_.clear();
}

int ActivationOffload::Park(const std::vector<torch::Tensor>& inputs) {
  TraceSpan span("offload out", "copy");
  WaitForCopiesOut();
  Entry entry;
  for (const torch::Tensor& t : inputs) entry.host.push_back(Acquire(t));
  stream_.Run([&] {
    for (size_t i = 0; i < inputs.size(); ++i) {
      entry.host[i].copy_(inputs[i], /*non_blocking=*/true);
      copied_out_ += static_cast<int64_t>(inputs[i].nbytes());
      parked_bytes_ += static_cast<int64_t>(inputs[i].nbytes());
    }
  });
  if (device_.is_cuda()) copying_out_ = inputs;  // until the side stream has read them
  entries_.push_back(std::move(entry));
  return static_cast<int>(entries_.size()) - 1;
}

void ActivationOffload::Issue(Entry& entry) {
  // Allocated on the compute stream (which frees them), filled on the side one.
  for (const torch::Tensor& h : entry.host)
    entry.fetched.push_back(
        torch::empty(h.sizes(), torch::TensorOptions().dtype(h.dtype()).device(device_)));
  stream_.Run([&] {
    for (size_t i = 0; i < entry.host.size(); ++i) {
      entry.fetched[i].copy_(entry.host[i], /*non_blocking=*/true);
      copied_in_ += static_cast<int64_t>(entry.host[i].nbytes());
    }
  });
  entry.issued = true;
}

std::vector<torch::Tensor> ActivationOffload::Fetch(int handle) {
  if (handle < 0 || handle >= static_cast<int>(entries_.size()) ||
      entries_[static_cast<size_t>(handle)].host.empty()) {
    throw std::logic_error("activation offload: no parked inputs under handle " +
                           std::to_string(handle));
  }
  TraceSpan span("offload in", "copy");
  WaitForCopiesOut();
  Entry& entry = entries_[static_cast<size_t>(handle)];
  if (!entry.issued) Issue(entry);
  stream_.Join();  // the compute stream waits for the copy, the host does not
  std::vector<torch::Tensor> out = std::move(entry.fetched);
  entry.fetched.clear();
  // The host buffers go back to the pool at Clear: a copy out of them may
  // still be in flight on a GPU until the compute stream has used `out`.
  if (device_.is_cuda() && handle > 0) {
    Entry& before = entries_[static_cast<size_t>(handle - 1)];
    if (!before.issued && !before.host.empty()) Issue(before);
  }
  return out;
}

void ActivationOffload::Release(int first, int end) {
  WaitForCopiesOut();
  stream_.Synchronize();  // no copy still reads a buffer handed out again
  for (int h = std::max(first, 0); h < std::min(end, Next()); ++h) {
    Entry& e = entries_[static_cast<size_t>(h)];
    for (torch::Tensor& t : e.host) {
      parked_bytes_ -= static_cast<int64_t>(t.nbytes());
      pool_[{t.scalar_type(), t.sizes().vec()}].push_back(t);
    }
    e.host.clear();
    e.fetched.clear();
  }
  for (const Entry& e : entries_) {
    if (!e.host.empty()) return;
  }
  entries_.clear();
  parked_bytes_ = 0;
}

void ActivationOffload::Clear() { Release(0, Next()); }

}  // namespace up
