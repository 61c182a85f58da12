// decoder_proc: the decoder stage (one decoder part) as a process. Started by `unet-pipeline`.
#include "decoder_proc/decoder_stage.h"

int main(int argc, char** argv) {
  return up::stage::StageMain(argc, argv, "decoder", [](const up::stage::StageContext& ctx) {
    return std::make_unique<up::DecoderStage>(ctx);
  });
}
