// The dynamic loss scale of `train.precision: fp16`, kept as PyTorch's
// GradScaler keeps it: the loss is multiplied by `scale` before backward,
// gradients are divided by it before clipping and the step; a step whose
// gradients hold an inf or NaN anywhere (in any stage) is skipped and the
// scale halves; after `growth_interval` finite steps in a row it doubles.
//
// Every stage and the reference trainer hold one and update it from the same
// "found inf" verdict, so all copies stay equal; the scale and the growth
// counter are saved in every stage file. A plain value type, torch-free.
#pragma once

#include <cstdint>

namespace up {

struct LossScale {
  double scale = 65536.0;
  int64_t growth_tracker = 0;  // finite steps since the scale last changed
  int growth_interval = 2000;

  static constexpr double kGrowth = 2.0;
  static constexpr double kBackoff = 0.5;

  // After a step: `found_inf` says whether any gradient was not finite.
  void Update(bool found_inf) {
    if (found_inf) {
      scale *= kBackoff;
      growth_tracker = 0;
    } else if (++growth_tracker == growth_interval) {
      scale *= kGrowth;
      growth_tracker = 0;
    }
  }
};

}  // namespace up
