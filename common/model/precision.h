// Mixed precision: `train.precision: bf16` (or `fp16`) runs forward passes
// (and the loss) under autocast to bfloat16 (float16) on the stage's device
// type, with fp32 master
// weights, gradients and optimizer state; backward runs outside autocast, as
// usual. Boundary tensors travel in whatever dtype autocast produced. Every
// trainer scopes its forward passes with AutocastScope, so the pipeline and
// the reference cast identically. fp16 adds a dynamic loss scale
// (stage_optimizer.h, loss_scale.h); ScaledBackward applies it.
#pragma once

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include "common/config.h"

namespace up {

class AutocastScope {
 public:
  AutocastScope(const TrainConfig& train, const torch::Device& device)
      : type_(device.type()), on_(train.precision == "bf16" || train.precision == "fp16") {
    if (!on_) return;
    was_enabled_ = at::autocast::is_autocast_enabled(type_);
    was_dtype_ = at::autocast::get_autocast_dtype(type_);
    at::autocast::set_autocast_enabled(type_, true);
    at::autocast::set_autocast_dtype(type_, train.precision == "fp16" ? at::kHalf : at::kBFloat16);
  }
  ~AutocastScope() {
    if (!on_) return;
    at::autocast::set_autocast_enabled(type_, was_enabled_);
    at::autocast::set_autocast_dtype(type_, was_dtype_);
    at::autocast::clear_cache();
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  c10::DeviceType type_;
  bool on_;
  bool was_enabled_ = false;
  at::ScalarType was_dtype_ = at::kFloat;
};

// Backward from `loss` multiplied by the loss scale (exactly loss.backward()
// when the scale is 1, as it is unless fp16).
inline void ScaledBackward(const torch::Tensor& loss, double scale) {
  if (scale == 1.0) {
    loss.backward();
  } else {
    (loss * scale).backward();
  }
}

}  // namespace up
