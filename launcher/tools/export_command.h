// `unet-pipeline export --checkpoint DIR --out model.pt`: both halves of a
// trained U-Net merged into one state dict that Python's
// `torch.load(path, weights_only=True)` returns as a dict of tensors, named
// as a plain PyTorch U-Net names them (docs/EXPORT.md, scripts/unet_reference.py):
//   encoder.down{i}.{conv1,norm1,conv2,norm2}.*, encoder.bottleneck.*,
//   decoder.up{i}.{weight,bias}, decoder.conv{i}.*, decoder.head.{weight,bias}
// For model.kind = nnunet the names are dynamic_network_architectures' own,
// aliases included, so its network built from the same plan loads the file
// with strict=True (scripts/nnunet_reference.py).
#pragma once

#include <string>

#include "common/config.h"
#include "common/model/digest.h"  // NamedTensors

namespace up {

// The merged state dict: "encoder." + each encoder name, then "decoder." +
// each decoder name, each list in name order (nnunet: then the reference's
// duplicate names); contiguous CPU tensors (BatchNorm's num_batches_tracked
// stays int64).
NamedTensors MergedStateDict(const ModelConfig& model, const torch::nn::Module& encoder,
                             const torch::nn::Module& decoder);

int ExportCommand(int argc, char** argv);

}  // namespace up
