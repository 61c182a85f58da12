// `unet-pipeline export --checkpoint DIR --out model.pt`: both halves of a
// trained U-Net merged into one state dict that Python's
// `torch.load(path, weights_only=True)` returns as a dict of tensors, named
// as a plain PyTorch U-Net names them (docs/EXPORT.md, scripts/unet_reference.py):
//   encoder.down{i}.{conv1,norm1,conv2,norm2}.*, encoder.bottleneck.*,
//   decoder.up{i}.{weight,bias}, decoder.conv{i}.*, decoder.head.{weight,bias}
#pragma once

#include <string>

#include "common/model/digest.h"  // NamedTensors

namespace up {

struct TrainedModel;

// The merged state dict: "encoder." + each encoder name, then "decoder." +
// each decoder name, each list in name order; contiguous CPU float tensors
// (BatchNorm's num_batches_tracked stays int64).
NamedTensors MergedStateDict(TrainedModel& model);

int ExportCommand(int argc, char** argv);

}  // namespace up
