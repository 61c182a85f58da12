// `unet-pipeline export --checkpoint DIR --out model.pt`: both halves of a
// trained U-Net merged into one state dict (common/model/state_dict.h) that
// Python's `torch.load(path, weights_only=True)` returns as a dict of
// tensors; `--format nnunet` writes nnU-Net's trained-model folder
// (common/nnunet/nnunet_export.h).
#pragma once

namespace up {

int ExportCommand(int argc, char** argv);

}  // namespace up
