// The decoder stage: a part of the U-Net's levels up with their heads (the
// last part computes the loss), run as a pipeline part (stage/part_stage.h:
// F and B, or FB in the last part, VF or VP, and the step). What it adds is
// its half: the levels it keeps of the whole decoder, built with the whole
// decoder's seed so its weights are the ones single-process training starts
// from. A library first, so tests can run it in-process; main.cpp only starts it.
#pragma once

#include "common/model/unet.h"
#include "stage/part_stage.h"

namespace up {

class DecoderStage : public stage::PartStage {
 public:
  // `ctx.stage` must be a decoder part of `ctx.layout`.
  explicit DecoderStage(const stage::StageContext& ctx);

  UNetDecoder& model() { return model_; }

 private:
  DecoderStage(const stage::StageContext& ctx, UNetDecoder part);
  PartTensors Compute(const PartTensors& inputs) override;

  UNetDecoder model_;  // the TrainingStage's module, typed
};

}  // namespace up
