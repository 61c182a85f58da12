// See nnunet_export.h.
#include "common/nnunet/nnunet_export.h"

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <iostream>

#include "common/base/errors.h"
#include "common/base/fs_util.h"
#include "common/base/json_writer.h"
#include "common/model/state_dict.h"
#include "common/model/tensor_file.h"
#include "common/nnunet/nnunet_layout.h"
#include "common/nnunet/nnunet_plans.h"

namespace up {
namespace {

namespace fs = std::filesystem;

constexpr const char* kKeptPlans = "nnunet_plans.json";
constexpr const char* kKeptSource = "nnunet.json";

// The run folder a checkpoint folder (RUN/checkpoints/step-N or best) is in.
fs::path RunOf(const TrainedModel& model) {
  return fs::absolute(fs::path(model.checkpoint_dir))
      .lexically_normal()
      .parent_path()
      .parent_path();
}

std::string DatasetJson(const NnunetExportOptions& o, const ModelConfig& m) {
  if (!o.dataset_json.empty()) {
    const std::string text = ReadFile(o.dataset_json);
    YAML::Node n;
    try {
      n = YAML::Load(text);
    } catch (const YAML::Exception& e) {
      throw UsageError("--dataset-json " + o.dataset_json + ": not valid JSON: " + e.msg);
    }
    const YAML::Node channels = n["channel_names"], labels = n["labels"];
    if (!channels || !channels.IsMap() || !labels || !labels.IsMap() || !n["file_ending"]) {
      throw UsageError("--dataset-json " + o.dataset_json +
                       ": expected nnU-Net's dataset.json (channel_names, labels, file_ending)");
    }
    // Plain labels: one per output; regions: background and one per output.
    const int heads = static_cast<int>(labels.size()) - (m.regions.empty() ? 0 : 1);
    if (static_cast<int>(channels.size()) != m.in_channels || heads != m.num_classes) {
      throw UsageError(
          "--dataset-json " + o.dataset_json + " names " + std::to_string(channels.size()) +
          " channels and " + std::to_string(labels.size()) + " labels, but the model takes " +
          std::to_string(m.in_channels) + " channels and predicts " +
          std::to_string(m.num_classes) + (m.regions.empty() ? " classes" : " regions") +
          "; give the dataset.json of the data it was trained on");
    }
    for (const auto& label : labels) {
      if (m.regions.empty() && !label.second.IsScalar()) {
        throw UsageError("--dataset-json " + o.dataset_json + ": label '" +
                         label.first.as<std::string>() +
                         "' is a region (a list of labels), but the model was trained on classes; "
                         "give the dataset.json of the data it was trained on");
      }
    }
    return text;
  }
  if (!m.regions.empty()) {
    throw UsageError(
        "--format nnunet: the model was trained on regions (model.regions); give "
        "--dataset-json with the dataset.json that defines them");
  }
  JsonWriter channels, labels;
  for (int c = 0; c < m.in_channels; ++c)
    channels.Field(std::to_string(c), "channel_" + std::to_string(c));
  labels.Field("background", 0);
  for (int k = 1; k < m.num_classes; ++k) labels.Field("class_" + std::to_string(k), k);
  return JsonWriter()
             .Raw("channel_names", channels.str())
             .Raw("labels", labels.str())
             .Field("numTraining", 0)
             .Field("file_ending", ".nii.gz")
             .Field("description",
                    "written by unet-pipeline export: label k is the model's class k")
             .str() +
         "\n";
}

}  // namespace

void KeepNnunetPlans(const std::string& run_dir, const Config& config) {
  if (config.model.kind != ModelKind::kNnunet || config.model.plans.empty()) return;
  WriteFileAtomic((fs::path(run_dir) / kKeptPlans).string(), ReadFile(config.model.plans));
  WriteFileAtomic((fs::path(run_dir) / kKeptSource).string(),
                  JsonWriter()
                          .Field("configuration", config.model.configuration)
                          .Field("plans", fs::absolute(config.model.plans).string())
                          .str() +
                      "\n");
}

namespace {

// What nnU-Net's trainer saves and its predictor reads, for `model`.
c10::impl::GenericDict NnunetCheckpoint(const TrainedModel& model, const std::string& configuration,
                                        const std::string& fold) {
  const ModelConfig& m = model.config.model;
  c10::impl::GenericDict weights(c10::StringType::get(), c10::TensorType::get());
  for (const auto& [name, t] : MergedStateDict(m, *model.encoder, *model.decoder))
    weights.insert(name, t);
  c10::impl::GenericDict init_args(c10::StringType::get(), c10::AnyType::get());
  init_args.insert("configuration", configuration);
  if (fold == "all")
    init_args.insert("fold", fold);
  else
    init_args.insert("fold", static_cast<int64_t>(std::stoi(fold)));
  std::vector<c10::IValue> axes;
  for (int64_t a = 0; a < m.dims; ++a) axes.emplace_back(a);
  c10::impl::GenericDict made_by(c10::StringType::get(), c10::AnyType::get());
  made_by.insert("step", model.step);
  made_by.insert("checkpoint", model.checkpoint_dir);
  c10::impl::GenericDict checkpoint(c10::StringType::get(), c10::AnyType::get());
  checkpoint.insert("network_weights", weights);
  checkpoint.insert("trainer_name", std::string("nnUNetTrainer"));
  checkpoint.insert("init_args", init_args);
  checkpoint.insert("inference_allowed_mirroring_axes", c10::ivalue::Tuple::create(axes));
  const int64_t per = std::max(1, model.config.train.steps_per_epoch);
  checkpoint.insert("current_epoch", model.step / per);
  checkpoint.insert("unet_pipeline", made_by);
  return checkpoint;
}

}  // namespace

std::string WriteNnunetResults(const std::string& run_dir, const Config& config) {
  const DataConfig& d = config.data;
  const NnunetDataset ds = FindNnunetDataset(d.dataset, d.preprocessed, d.plans, d.configuration);
  const fs::path root =
      d.results.empty() ? fs::path(run_dir) / "nnUNet_results" : fs::path(d.results);
  const fs::path trainer =
      root / ds.name / NnunetTrainerFolder(kNnunetResultsTrainer, ds.plans, ds.configuration);
  const std::string fold_name = d.AllFolds() ? "fold_all" : "fold_" + d.fold;
  std::error_code ec;
  fs::create_directories(trainer, ec);
  if (ec) {
    throw UsageError("data.results = '" + root.string() + "': cannot create '" + trainer.string() +
                     "' (" + ec.message() + "); the run is in " + run_dir);
  }
  // The trainer folder's files are the same for every fold.
  WriteFileAtomic((trainer / "plans.json").string(), ReadFile(ds.plans_file));
  WriteFileAtomic((trainer / "dataset.json").string(), ReadFile(ds.dir + "/dataset.json"));
  if (fs::exists(ds.dir + "/dataset_fingerprint.json", ec))
    WriteFileAtomic((trainer / "dataset_fingerprint.json").string(),
                    ReadFile(ds.dir + "/dataset_fingerprint.json"));

  const TrainedModel final_model = LoadTrainedModel(run_dir);
  const fs::path best_dir = fs::path(run_dir) / "checkpoints" / "best";
  const bool has_best = fs::exists(best_dir, ec);

  // The fold folder is built beside its place and swapped in whole.
  const fs::path fold = trainer / fold_name;
  const fs::path staging = trainer / (fold_name + ".staging");
  const fs::path old = trainer / (fold_name + ".old");
  fs::remove_all(staging, ec);
  fs::create_directories(staging);
  const RemoveOnExit cleanup(staging.string());
  SavePickledValue((staging / "checkpoint_final.pth").string(),
                   NnunetCheckpoint(final_model, ds.configuration, d.fold));
  if (has_best) {
    const TrainedModel best = LoadTrainedModel(best_dir.string());
    SavePickledValue((staging / "checkpoint_best.pth").string(),
                     NnunetCheckpoint(best, ds.configuration, d.fold));
  } else {
    fs::copy_file(staging / "checkpoint_final.pth", staging / "checkpoint_best.pth");
  }
  const fs::path log = fs::path(run_dir) / "launcher.log";
  if (fs::exists(log, ec))
    WriteFileAtomic((staging / "training_log_unet_pipeline.txt").string(), ReadFile(log.string()));
  WriteFileAtomic((staging / "unet_pipeline.json").string(),
                  JsonWriter()
                          .Field("run", fs::absolute(run_dir).string())
                          .Field("final_step", final_model.step)
                          .Field("best", has_best ? "checkpoints/best (validation Dice)"
                                                  : "the final checkpoint (no validation)")
                          .str() +
                      "\n");
  // The previous fold is removed only once the new one is in place; a
  // failure in between leaves it as fold_N.old.
  fs::remove_all(old, ec);
  if (fs::exists(fold, ec)) fs::rename(fold, old);
  fs::rename(staging, fold);
  fs::remove_all(old, ec);
  return fold.string();
}

void ExportNnunetFolder(const TrainedModel& model, const NnunetExportOptions& o) {
  const ModelConfig& m = model.config.model;
  if (m.kind != ModelKind::kNnunet) {
    throw UsageError("--format nnunet: the run trained model.kind " + NameOf(m.kind) +
                     "; nnU-Net's predictor loads its own architectures (model.kind: nnunet)");
  }
  const fs::path run = RunOf(model);
  const std::string plans = o.plans.empty() ? (run / kKeptPlans).string() : o.plans;
  std::string configuration = o.configuration;
  if (configuration.empty() && fs::exists(run / kKeptSource)) {
    configuration =
        YAML::Load(ReadFile((run / kKeptSource).string()))["configuration"].as<std::string>();
  }
  if (!fs::exists(plans) || configuration.empty()) {
    throw UsageError("--format nnunet: the run " + run.string() +
                     " did not keep its nnU-Net plans (runs before this version); give --plans "
                     "FILE and --configuration NAME as it was trained with");
  }
  // The plans must build the network this run trained.
  const NnunetPlan plan = ReadNnunetPlan(plans, configuration);
  if (NnunetArchitectureText(plan.architecture) != NnunetArchitectureText(m.nnunet)) {
    throw UsageError("--plans " + plans + " configuration " + configuration +
                     " builds another network than the run trained; give the plans it was "
                     "trained with");
  }
  std::error_code ec;
  const fs::path out = fs::absolute(o.out);
  if (fs::exists(out, ec) && !fs::is_empty(out, ec)) {
    throw UsageError("--out " + o.out + " exists and is not empty; give a new folder");
  }
  const std::string dataset = DatasetJson(o, m);

  const fs::path staging = out.string() + ".staging";
  fs::remove_all(staging, ec);
  fs::create_directories(staging / "fold_0");
  const RemoveOnExit cleanup(staging.string());
  WriteFileAtomic((staging / "plans.json").string(), ReadFile(plans));
  WriteFileAtomic((staging / "dataset.json").string(), dataset);

  SavePickledValue((staging / "fold_0" / "checkpoint_final.pth").string(),
                   NnunetCheckpoint(model, configuration, "0"));

  fs::remove(out, ec);  // an empty folder given as --out
  fs::rename(staging, out);
  std::cout << "wrote " << out.string() << ": nnU-Net's trained-model folder (plans.json, "
            << "dataset.json" << (o.dataset_json.empty() ? " (generated)" : "")
            << ", fold_0/checkpoint_final.pth) from " << model.checkpoint_dir << " (step "
            << model.step << ")\n"
            << "predict with nnU-Net v2:\n"
            << "  import torch\n"
            << "  from nnunetv2.inference.predict_from_raw_data import nnUNetPredictor\n"
            << "  p = nnUNetPredictor(device=torch.device(\"cuda\"))  # or \"cpu\"; "
            << "use_mirroring=False as predict without --mirror\n"
            << "  p.initialize_from_trained_model_folder(\"" << out.string()
            << "\", use_folds=(0,))\n"
            << "  p.predict_from_files(\"IMAGES_FOLDER\", \"OUTPUT_FOLDER\")\n";
}

}  // namespace up
