// Parking: moving one stage's whole training state (parameters, their
// gradients, buffers and the optimizer's per-parameter state) off its device
// into host buffers while the other stage holds the GPU, and back.
//
// The same tensor objects stay everywhere: each tensor's storage is swapped
// with set_data(), so the optimizer (which keys its state by parameter) never
// notices, never has to be re-created and never sees a tensor on the wrong
// device. Host buffers are allocated once (pinned when a GPU is there) and
// reused by every park. After parking, the process returns its cached device
// memory to the driver, since the other stage's process cannot use it.
// On a GPU the copies run on a side stream (device_memory.h), so a stage can
// start fetching its state back (Prefetch) before its turn, while the other
// stage still computes (`pipeline.prefetch: on`, where the device has room
// for both states); its turn then only waits for copies still in flight.
//
// Not thread-safe; the stage's one thread parks and unparks.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/model/device_memory.h"

namespace up {

class StageParking {
 public:
  StageParking(torch::nn::Module& module, torch::optim::Optimizer& optimizer, torch::Device device);

  void Park();      // device -> host; no-op when parked
  void Prefetch();  // starts host -> device copies on the side stream; no-op when not parked
  void Unpark();    // host -> device (Prefetch, then the current stream waits for it)
  bool parked() const { return parked_; }
  int64_t parked_bytes() const { return parked_bytes_; }

 private:
  friend void MoveTrainingState(torch::nn::Module&, torch::optim::Optimizer&, torch::Device);

  torch::nn::Module& module_;
  torch::optim::Optimizer& optimizer_;
  torch::Device device_;
  std::vector<torch::Tensor> host_;  // parking buffers, index-aligned with Tensors()
  SideCopyStream copies_;
  bool parked_ = false;
  bool joined_ = true;  // the current stream waits for the last Prefetch's copies
  int64_t parked_bytes_ = 0;
};

// Moves every tensor of the training state to `device`, keeping the objects
// (after loading a checkpoint onto the CPU, say).
void MoveTrainingState(torch::nn::Module& module, torch::optim::Optimizer& optimizer,
                       torch::Device device);

// Whether a stage on `device` parks outside its turns: pipeline.park always |
// never | auto (only when another stage shares its GPU, or a CPU device that
// a `train.memory_budget` makes a card of that size).
bool ShouldPark(const std::string& park, const torch::Device& device, bool shared,
                bool budgeted = false);
// The two-stage case: whether both stages park.
bool ShouldPark(const std::string& park, const torch::Device& encoder, const torch::Device& decoder,
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
