// See nnunet_validation.h.
#include "common/nnunet/nnunet_validation.h"

#include <yaml-cpp/yaml.h>

#include <filesystem>

#include "common/base/errors.h"
#include "common/base/fs_util.h"
#include "common/base/json_writer.h"
#include "common/nnunet/nnunet_import.h"
#include "common/nnunet/nnunet_layout.h"

namespace up {

namespace fs = std::filesystem;

NnunetValidation WriteNnunetValidation(const std::string& fold_dir, const std::string& run_dir,
                                       const Config& config) {
  const DataConfig& d = config.data;
  const NnunetDataset ds = FindNnunetDataset(d.dataset, d.preprocessed, d.plans, d.configuration);
  const fs::path fold(fold_dir);
  const fs::path staging = fold / "validation.staging";
  const fs::path done = fold / "validation";
  std::error_code ec;
  fs::remove_all(staging, ec);
  const RemoveOnExit cleanup(staging.string());
  const std::string device = config.pipeline.encoder.device.rfind("cuda", 0) == 0 ? "cuda" : "cpu";
  const std::string request = (fs::path(run_dir) / "nnunet_validation-request.json").string();
  const std::string log = (fs::path(run_dir) / "nnunet_validation.log").string();
  WriteFileAtomic(request, JsonWriter()
                                   .Field("model_folder", fold.parent_path().string())
                                   .Field("fold", std::stoi(d.fold))
                                   .Field("data_dir", ds.data_dir)
                                   .Field("gt_folder", ds.dir + "/gt_segmentations")
                                   .Field("splits_file", ds.splits_file())
                                   .Field("output", staging.string())
                                   .Field("device", device)
                                   .Field("threads", config.train.threads)
                                   .Field("save_probabilities",
                                          config.validate.nnunet == ValidationFolder::kNpz)
                                   .str() +
                               "\n");
  try {
    RunNnunetScript("nnunet_validate.py", request, log, "validating fold " + d.fold, 1);
  } catch (const Error& e) {
    throw RuntimeError(std::string(e.what()) + "; the fold is filed in " + fold_dir +
                       ": validate it again with unet-pipeline train --resume " + run_dir);
  }
  fs::remove(request, ec);
  NnunetValidation out;
  try {
    const YAML::Node summary = YAML::Load(ReadFile((staging / "summary.json").string()));
    out.foreground_dice = summary["foreground_mean"]["Dice"].as<double>();
    out.cases = static_cast<int>(summary["metric_per_case"].size());
  } catch (const YAML::Exception& e) {
    throw RuntimeError("nnU-Net: " + (staging / "summary.json").string() +
                       " is not nnU-Net's summary (" + e.msg + ")");
  }
  fs::remove_all(done, ec);
  fs::rename(staging, done);
  out.folder = done.string();
  return out;
}

}  // namespace up
