// nnU-Net v2's folders, as its own commands lay them out, for `data.kind:
// nnunet`:
//
//   $nnUNet_preprocessed/Dataset001_Sample/
//       dataset.json  dataset_fingerprint.json  nnUNetPlans.json  splits_final.json
//       nnUNetPlans_3d_fullres/           (the configuration's data_identifier)
//           case_000.b2nd  case_000_seg.b2nd  case_000.pkl   (or the older .npz)
//   $nnUNet_results/Dataset001_Sample/<trainer>__<plans>__<configuration>/
//       dataset.json  plans.json  dataset_fingerprint.json
//       fold_0/checkpoint_final.pth  checkpoint_best.pth
//
// Torch-free: the config resolves a dataset (its plans, channels and labels)
// before any process starts. Every problem is a UsageError of one line that
// names the path and what to run (`nnUNetv2_plan_and_preprocess -d N`).
#pragma once

#include <string>
#include <vector>

namespace up {

// A preprocessed dataset, resolved.
struct NnunetDataset {
  std::string preprocessed;                // the nnUNet_preprocessed root
  std::string name;                        // Dataset001_Sample
  int id = 0;                              // 1
  std::string dir;                         // preprocessed/name
  std::string plans;                       // nnUNetPlans
  std::string plans_file;                  // dir/<plans>.json
  std::string configuration;               // 3d_fullres
  std::string data_identifier;             // nnUNetPlans_3d_fullres
  std::string data_dir;                    // dir/data_identifier
  std::vector<std::string> channel_names;  // dataset.json's channel_names, by index
  std::vector<std::string> label_names;    // [k]: the name of label k (0..K-1)
  // Region-based (a dataset.json label that lists several values, as
  // nnU-Net's BraTS datasets): each foreground entry is a region, the label
  // values it holds, in dataset.json's order; the labels are then 0..the
  // largest value named ("label k"). Empty: plain labels.
  std::vector<std::vector<int>> regions;
  std::vector<int> regions_class_order;  // the label each region paints, in order
  std::string splits_file() const { return dir + "/splits_final.json"; }
  // The network's outputs: one per label, or one per region.
  int outputs() const {
    return static_cast<int>(regions.empty() ? label_names.size() : regions.size());
  }
};

// Finds `dataset` (a name like Dataset001_Sample, its number "1", or a
// dataset folder's path) under `preprocessed` (the root; may be empty when
// `dataset` is a path) with its plans and configuration. Reads dataset.json
// (channels, labels 0..K-1 or regions; an ignore label is refused) and the plans'
// data_identifier; the data folder must exist.
NnunetDataset FindNnunetDataset(const std::string& dataset, const std::string& preprocessed,
                                const std::string& plans, const std::string& configuration);

// The cases of a preprocessed data folder (`X.b2nd` beside `X_seg.b2nd`, or
// `X.npz`), sorted; each with its files (data, seg, properties).
struct NnunetCaseFiles {
  std::string name;
  std::vector<std::string> files;
};
std::vector<NnunetCaseFiles> ListNnunetCases(const NnunetDataset& d);

// A fold of splits_final.json: "0".."4" (any index the file has) or "all"
// (every case trains, none is held out; `train` and `val` come back empty).
struct NnunetFold {
  std::vector<std::string> train;
  std::vector<std::string> val;
};
NnunetFold ReadNnunetFold(const std::string& splits_file, const std::string& fold);

// nnU-Net's trained-model folder name: <trainer>__<plans>__<configuration>.
std::string NnunetTrainerFolder(const std::string& trainer, const std::string& plans,
                                const std::string& configuration);

// The trainer name this project's runs are filed under in nnUNet_results
// (its checkpoints name nnUNetTrainer, whose network and inference the
// predictor then builds): `nnUNetv2_predict ... -tr nnUNetTrainerUnetPipeline`.
inline constexpr const char* kNnunetResultsTrainer = "nnUNetTrainerUnetPipeline";

}  // namespace up
