// nnU-Net's validation folder for a fold unet-pipeline filed in
// nnUNet_results (nnunet_export.h's WriteNnunetResults): fold_N/validation/
// holding each held-out case's segmentation in its original geometry (and
// with validate.nnunet: npz its probabilities) and summary.json, written as
// nnUNetTrainer writes them at the end of its training, by nnU-Net's own
// code: scripts/nnunet_validate.py runs nnU-Net's predictor on the fold's
// checkpoint_final.pth over the preprocessed cases of splits_final.json's
// `val` list, exports with export_prediction_from_logits and scores with
// compute_metrics_on_folder. So nnU-Net's numbers for the fold are nnU-Net's
// own, and nnUNetv2_find_best_configuration -tr nnUNetTrainerUnetPipeline
// reads the folder. Built beside its place and swapped in whole.
#pragma once

#include <string>

#include "common/config/config.h"

namespace up {

struct NnunetValidation {
  std::string folder;            // fold_N/validation
  int cases = 0;                 // held-out cases predicted
  double foreground_dice = 0.0;  // summary.json's foreground_mean Dice
};

// For a run of data.kind nnunet with a fold (not all) and validate.nnunet on
// or npz, once `fold_dir` holds its checkpoint_final.pth. RuntimeError of one
// line (the script's last line, its log under `run_dir`, and how to run it
// again: train --resume RUN) when it fails; the fold's checkpoints stay.
NnunetValidation WriteNnunetValidation(const std::string& fold_dir, const std::string& run_dir,
                                       const Config& config);

}  // namespace up
