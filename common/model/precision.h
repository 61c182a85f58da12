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
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/torch.h>

#include <optional>

#include "common/config/config.h"

namespace up {

// Autocast on one device type set for a scope (enabled or not, in `dtype`),
// and what was there before restored at its end.
class AutocastSetting {
 public:
  AutocastSetting(c10::DeviceType type, bool enabled, at::ScalarType dtype)
      : type_(type),
        was_enabled_(at::autocast::is_autocast_enabled(type)),
        was_dtype_(at::autocast::get_autocast_dtype(type)) {
    at::autocast::set_autocast_enabled(type_, enabled);
    if (enabled) at::autocast::set_autocast_dtype(type_, dtype);
  }
  ~AutocastSetting() {
    at::autocast::set_autocast_enabled(type_, was_enabled_);
    at::autocast::set_autocast_dtype(type_, was_dtype_);
    at::autocast::clear_cache();
  }
  AutocastSetting(const AutocastSetting&) = delete;
  AutocastSetting& operator=(const AutocastSetting&) = delete;

 private:
  c10::DeviceType type_;
  bool was_enabled_;
  at::ScalarType was_dtype_;
};

// The dtype `train.precision` computes the forward in: autocast's (bf16,
// fp16), or fp32 without it. Boundary tensors travel in it.
inline at::ScalarType ForwardDtype(const TrainConfig& train) {
  if (train.precision == Precision::kBf16) return at::kBFloat16;
  if (train.precision == Precision::kFp16) return at::kHalf;
  return at::kFloat;
}

// The trainers' forward scope: autocast as `train.precision` asks (nothing
// for fp32).
class AutocastScope {
 public:
  AutocastScope(const TrainConfig& train, const torch::Device& device) {
    const at::ScalarType dtype = ForwardDtype(train);
    if (dtype != at::kFloat) setting_.emplace(device.type(), true, dtype);
  }

 private:
  std::optional<AutocastSetting> setting_;
};

// CPU autocast runs a few ops in fp32 that CUDA's runs in their input's
// dtype, max_pool3d among them: on the CPU's emulated device a 3-D U-Net then
// keeps an fp32 copy of every pooled level's input for the backward, which no
// card holds. Within this scope an op runs in its inputs' dtype, as on CUDA.
// Exact for max pooling: a max is one of its inputs, and its gradient goes
// to one of them.
class InputDtypeScope {
 public:
  InputDtypeScope() : no_cpu_autocast_(c10::DispatchKey::AutocastCPU) {}

 private:
  c10::impl::ExcludeDispatchKeyGuard no_cpu_autocast_;
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
