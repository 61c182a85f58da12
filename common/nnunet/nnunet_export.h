// A run of model.kind nnunet as nnU-Net v2's own trained-model folder
// (`unet-pipeline export --format nnunet --out DIR`), which nnU-Net's
// predictor (`nnUNetPredictor.initialize_from_trained_model_folder`,
// `nnUNetv2_predict -i ... -o ... -d DIR`-style use) loads as it would a
// model nnU-Net trained:
//
//   DIR/plans.json                 the plans the run was built from, verbatim
//   DIR/dataset.json               the user's (--dataset-json), or one naming
//                                  model.in_channels channels and
//                                  model.num_classes labels 0..K-1
//   DIR/fold_0/checkpoint_final.pth  {network_weights: the state dict of
//                                  dynamic_network_architectures' network
//                                  (export's names, aliases included),
//                                  trainer_name: nnUNetTrainer, init_args:
//                                  {configuration, fold: 0},
//                                  inference_allowed_mirroring_axes, ...}
//
// The folder is built beside DIR and renamed into place: it is whole or
// absent. A run keeps what this needs from its start (KeepNnunetPlans): the
// dump of the config holds the architecture, not the plans' preprocessing.
#pragma once

#include <string>

#include "common/config/config.h"
#include "common/training/trained_model.h"

namespace up {

// At the start of a run of model.kind nnunet: RUN/nnunet_plans.json (the
// plans file, verbatim) and RUN/nnunet.json (its configuration's name and
// where it came from). Nothing for other kinds.
void KeepNnunetPlans(const std::string& run_dir, const Config& config);

// After a run of data.kind nnunet: its fold filed where nnU-Net looks,
// data.results (nnUNet_results; without one, RUN/nnUNet_results) /
// DatasetXXX/nnUNetTrainerUnetPipeline__<plans>__<configuration>/ with
// plans.json, dataset.json and dataset_fingerprint.json of the preprocessed
// dataset, and fold_N/ (fold_all) holding checkpoint_final.pth (the newest
// checkpoint), checkpoint_best.pth (checkpoints/best, the best validation
// Dice; the final one without validation), the run's log and
// unet_pipeline.json (the run folder). The fold folder is swapped in whole;
// other folds stay. `nnUNetv2_predict -d D -c CONF -f N -tr
// nnUNetTrainerUnetPipeline` loads it. Returns the fold folder.
std::string WriteNnunetResults(const std::string& run_dir, const Config& config);

struct NnunetExportOptions {
  std::string out;            // the folder to write; must not exist or be empty
  std::string plans;          // default: the run's nnunet_plans.json
  std::string configuration;  // default: the run's nnunet.json
  std::string dataset_json;   // default: generated
};

// UsageError (one line naming the file or option) when the plans do not
// build the run's network, the dataset.json does not fit the model, or OUT
// holds something. Prints what it wrote.
void ExportNnunetFolder(const TrainedModel& model, const NnunetExportOptions& options);

}  // namespace up
