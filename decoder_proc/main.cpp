// decoder_proc: the decoder stage (one decoder part) as a process. Started by `unet-pipeline`.
#include "decoder_proc/decoder_main.h"

int main(int argc, char** argv) { return up::DecoderProcMain(argc, argv); }
