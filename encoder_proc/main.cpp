// encoder_proc: the encoder stage (one encoder part) as a process. Started by `unet-pipeline`.
#include "encoder_proc/encoder_stage.h"

int main(int argc, char** argv) {
  return up::stage::StageMain(argc, argv, "encoder", [](const up::stage::StageContext& ctx) {
    return std::make_unique<up::EncoderStage>(ctx);
  });
}
