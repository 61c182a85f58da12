// The whole U-Net's weights as one PyTorch state dict, named as the user's
// own module names them: a classic U-Net as a plain PyTorch U-Net
// (docs/EXPORT.md, scripts/unet_reference.py):
//   encoder.down{i}.{conv1,norm1,conv2,norm2}.*, encoder.bottleneck.*,
//   decoder.up{i}.{weight,bias}, decoder.conv{i}.*, decoder.head.{weight,bias}
// model.kind = nnunet as dynamic_network_architectures names it, aliases
// included, so its network built from the same plan loads the dict with
// strict=True (scripts/nnunet_reference.py); model.kind = torchscript by the
// bundle's own keys. `export` writes it, and nnU-Net's trained-model folder
// holds it.
#pragma once

#include "common/config/config.h"
#include "common/model/digest.h"  // NamedTensors

namespace up {

// The merged state dict: "encoder." + each encoder name, then "decoder." +
// each decoder name, each list in name order (nnunet: then the reference's
// duplicate names; torchscript: only the user's keys, sorted); contiguous CPU
// tensors (BatchNorm's num_batches_tracked stays int64).
NamedTensors MergedStateDict(const ModelConfig& model, const torch::nn::Module& encoder,
                             const torch::nn::Module& decoder);

}  // namespace up
