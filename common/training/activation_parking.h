// A stage's activations outside the turn that uses them (pipeline.offload):
// the stage side of activation offload (common/model/activation_offload.h is
// the model side). With it on:
//   - what recompute keeps of each unit during B and FB (its input) waits in
//     host memory until that unit's backward: offload() is handed to the
//     part's levels;
//   - the part's received inputs (the first part's: the loader's images)
//     stay in host memory and each enters the device only as the level that
//     takes it starts, forward and recompute alike: mover() is handed to the
//     levels, Leaves() keeps them where they lie (the ring's pinned slots on
//     a GPU);
//   - the gradients received for its outputs stay there too until the
//     backward reaches each (ParkGradients, GradientToDevice; part_backward.h);
//   - on a CPU device, where host and device are one memory, Park() copies
//     the received tensors out of the ring (or the loader's batch) into
//     buffers outside the device's count and gives the slots back, and
//     entering the device is a counted copy: the budget sees what a GPU
//     would hold.
// With it off every call is a pass-through: inputs go on the device at
// once, nothing is parked. One per stage process; not thread-safe.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>

#include "common/config/config.h"
#include "common/model/activation_offload.h"
#include "common/model/unet.h"

namespace up::stage {

// The first stage's input, by its wire name.
inline constexpr const char* kImages = "images";

class ActivationParking {
 public:
  ActivationParking(const Config& config, const torch::Device& device);

  bool on() const { return offload_ != nullptr; }
  // For the levels: where units park their inputs (nullptr when off), and
  // how an input reaches the device (empty when off).
  ActivationOffload* offload() const { return offload_.get(); }
  InputMover mover() const;

  // The received tensors in `host` (views of ring slots, or the images) parked as above;
  // `release` gives their slots back once they are copied. No-op when off or
  // on a GPU (the slots are host memory there already).
  void Park(PartTensors* host, const std::function<void()>& release) const;
  // The gradients a stage received for its outputs (`grads`, views of ring
  // slots) parked the same way, for PartBackward to bring in one at a time.
  void ParkGradients(std::vector<torch::Tensor>* grads, const std::function<void()>& release) const;
  // A received gradient on the device, as the backward reaches its output.
  torch::Tensor GradientToDevice(const torch::Tensor& g) const;
  // The inputs the graph takes: on the device now (off), or where they lie
  // (on); `leaves`: the received ones (all but "images") require gradients.
  PartTensors Leaves(const PartTensors& host, bool leaves) const;
  // One input on the device (the mover's work; off: `t`, which Leaves put
  // there).
  torch::Tensor ToDevice(const torch::Tensor& t) const;
  // After a backward: every parked unit input's buffer back to the pool.
  void EndBackward() const;

 private:
  torch::Device device_;
  std::unique_ptr<ActivationOffload> offload_;
};

}  // namespace up::stage
