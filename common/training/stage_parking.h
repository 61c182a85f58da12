// Parking: moving one stage's whole training state (parameters, their
// gradients, buffers and the optimizer's per-parameter state) off its device
// into host buffers while the other stage holds the GPU, and back.
//
// The same tensor objects stay everywhere: each tensor's storage is swapped
// with set_data(), so the optimizer (which keys its state by parameter) never
// notices, never has to be re-created and never sees a tensor on the wrong
// device. Host buffers are allocated once (pinned when a GPU is there) and
// reused by every park. A turn fetches the model's part of the state
// (weights, gradients, buffers); the optimizer's state comes only for the
// optimizer's step (UnparkOptimizer), after the backward has let its
// activations go. A weight the turn left unchanged (a turn without the step)
// parks without a copy: its host copy is still good. After parking, the
// process returns its cached device memory to the driver, since the other
// stage's process cannot use it. On a GPU the copies run on a side stream
// (device_memory.h), so a stage can start fetching its state back (Prefetch)
// before its turn, while the other stage still computes (`pipeline.prefetch:
// on`, where the device has room for both); its turn then only waits for
// copies still in flight.
//
// Not thread-safe; the stage's one thread parks and unparks.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/device/device_memory.h"

namespace up {

class StageParking {
 public:
  StageParking(torch::nn::Module& module, torch::optim::Optimizer& optimizer, torch::Device device);

  // Device -> host for whatever is on the device; no-op when parked. A
  // weight unchanged since it was fetched (no optimizer step since, the same
  // tensor at the same version) goes back to the host copy it came from,
  // without a copy.
  void Park();
  // Host -> device of the model's part (parameters, gradients, buffers) on
  // the side stream; no-op when not parked. The optimizer's state stays in
  // host memory until UnparkOptimizer: a turn's forward and backward do not
  // read it, so it need not share the device with their activations.
  void Prefetch();
  void Unpark();           // Prefetch, then the current stream waits for it
  void UnparkOptimizer();  // the optimizer's state onto the device, before its step
  bool parked() const { return parked_; }
  int64_t parked_bytes() const { return parked_bytes_; }
  // Bytes copied device -> host and host -> device so far.
  int64_t bytes_out() const { return bytes_out_; }
  int64_t bytes_in() const { return bytes_in_; }

 private:
  friend void MoveTrainingState(torch::nn::Module&, torch::optim::Optimizer&, torch::Device);

  // One tensor of the state: its host buffer, and where and at which version
  // it was last fetched from (to park it unchanged without a copy).
  using ImplPtr = c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;
  struct Slot {
    torch::Tensor host;    // this slot's parking buffer
    torch::Tensor source;  // the host data it was fetched from
    // The tensor it was fetched into (weakly: its address is not reused
    // while this lives, and a gradient made anew is another tensor) and its
    // version counter just after the fetch.
    c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl> fetched{ImplPtr()};
    int64_t version = -1;
  };
  void Fetch(bool optimizer);

  torch::nn::Module& module_;
  torch::optim::Optimizer& optimizer_;
  torch::Device device_;
  std::map<int64_t, Slot> slots_;  // by StateTensors' key
  SideCopyStream copies_;
  bool parked_ = false;            // the model's part is in host memory
  bool optimizer_parked_ = false;  // the optimizer's state is
  bool joined_ = true;             // the current stream waits for the last Prefetch's copies
  int64_t parked_bytes_ = 0;
  int64_t bytes_out_ = 0;
  int64_t bytes_in_ = 0;
};

// Moves every tensor of the training state to `device`, keeping the objects
// (after loading a checkpoint onto the CPU, say).
void MoveTrainingState(torch::nn::Module& module, torch::optim::Optimizer& optimizer,
                       torch::Device device);

// Whether a stage on `device` parks outside its turns: pipeline.park always |
// never | auto (only when another stage shares its GPU, or a CPU device that
// a `train.memory_budget` makes a card of that size).
bool ShouldPark(Park park, const torch::Device& device, bool shared, bool budgeted = false);
// The two-stage case: whether both stages park.
bool ShouldPark(Park park, const torch::Device& encoder, const torch::Device& decoder,
                bool budgeted = false);

// RAII turn: unparks on entry, parks on exit (when `enabled`).
class ParkedOutsideTurn {
 public:
  explicit ParkedOutsideTurn(StageParking* parking) : parking_(parking) {
    if (parking_) parking_->Unpark();
  }
  ~ParkedOutsideTurn() {
    if (parking_) parking_->Park();
  }
  ParkedOutsideTurn(const ParkedOutsideTurn&) = delete;
  ParkedOutsideTurn& operator=(const ParkedOutsideTurn&) = delete;

 private:
  StageParking* parking_;
};

}  // namespace up
