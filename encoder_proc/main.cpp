// encoder_proc: the encoder stage (one encoder part) as a process. Started by `unet-pipeline`.
#include "encoder_proc/encoder_main.h"

int main(int argc, char** argv) { return up::EncoderProcMain(argc, argv); }
