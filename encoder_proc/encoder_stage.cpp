// See encoder_stage.h.
#include "encoder_proc/encoder_stage.h"

#include "encoder_proc/encoder_main.h"
#include "stage/stage_worker.h"

#include "common/base/errors.h"

namespace up {
namespace {

const StageSpec& EncoderSpec(const stage::StageContext& ctx) {
  const StageSpec& spec = ctx.layout.stages.at(static_cast<size_t>(ctx.stage));
  if (!spec.encoder) throw UsageError("encoder_proc cannot run the " + spec.Name());
  return spec;
}

}  // namespace

EncoderStage::EncoderStage(const stage::StageContext& ctx)
    : EncoderStage(ctx, MakeEncoderPart(ctx.config, EncoderSpec(ctx).lo, EncoderSpec(ctx).hi)) {}

EncoderStage::EncoderStage(const stage::StageContext& ctx, UNetEncoder part)
    : PartStage(ctx, part.ptr(), part->parameter_positions(), part->whole_parameters()),
      model_(std::move(part)),
      input_(ctx.stage == 0 ? "images" : ctx.layout.InputName(ctx.stage)) {
  model_->set_checkpointing(recompute_unit());
  model_->set_offload(offload());
  model_->set_input_mover(input_mover());
}

PartTensors EncoderStage::Compute(const PartTensors& inputs) {
  return model_->ForwardPart(inputs.at(input_));  // from (n, C, *S / scale[lo-1])
}

int EncoderProcMain(int argc, char** argv) {
  return stage::StageMain(argc, argv, "encoder", [](const stage::StageContext& ctx) {
    return std::make_unique<EncoderStage>(ctx);
  });
}

}  // namespace up
