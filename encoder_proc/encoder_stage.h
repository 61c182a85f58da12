// The encoder stage: a part of the U-Net's levels down (and, in the last
// encoder part, the bottleneck), run as a pipeline part (stage/part_stage.h:
// F, B, VF and the step). What it adds is its half: the levels it keeps of
// the whole encoder, built with the whole encoder's seed so its weights are
// the ones single-process training starts from.
// A library first, so tests can run it in-process; main.cpp only starts it.
#pragma once

#include "common/model/unet.h"
#include "stage/part_stage.h"

namespace up {

class EncoderStage : public stage::PartStage {
 public:
  // `ctx.stage` must be an encoder part of `ctx.layout`.
  explicit EncoderStage(const stage::StageContext& ctx);

  UNetEncoder& model() { return model_; }

 private:
  EncoderStage(const stage::StageContext& ctx, UNetEncoder part);
  PartTensors Compute(const PartTensors& inputs) override;

  UNetEncoder model_;  // the TrainingStage's module, typed
  std::string input_;  // "images" (the first part) or skip{lo-1}
};

}  // namespace up
