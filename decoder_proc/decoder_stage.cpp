// See decoder_stage.h.
#include "decoder_proc/decoder_stage.h"

#include "decoder_proc/decoder_main.h"
#include "stage/stage_worker.h"

#include "common/base/errors.h"

namespace up {
namespace {

const StageSpec& DecoderSpec(const stage::StageContext& ctx) {
  const StageSpec& spec = ctx.layout.stages.at(static_cast<size_t>(ctx.stage));
  if (spec.encoder) throw UsageError("decoder_proc cannot run the " + spec.Name());
  return spec;
}

}  // namespace

DecoderStage::DecoderStage(const stage::StageContext& ctx)
    : DecoderStage(ctx, MakeDecoderPart(ctx.config, DecoderSpec(ctx).lo, DecoderSpec(ctx).hi)) {}

DecoderStage::DecoderStage(const stage::StageContext& ctx, UNetDecoder part)
    : PartStage(ctx, part.ptr(), part->parameter_positions(), part->whole_parameters()),
      model_(std::move(part)) {
  model_->set_checkpointing(recompute_unit());
  model_->set_offload(offload());
  model_->set_input_mover(input_mover());
}

PartTensors DecoderStage::Compute(const PartTensors& inputs) {
  return model_->ForwardPart(inputs);  // up{i} and logits{i} by level
}

int DecoderProcMain(int argc, char** argv) {
  return stage::StageMain(argc, argv, "decoder", [](const stage::StageContext& ctx) {
    return std::make_unique<DecoderStage>(ctx);
  });
}

}  // namespace up
