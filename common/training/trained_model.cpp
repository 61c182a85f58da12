// See trained_model.h.
#include "common/training/trained_model.h"

#include <filesystem>

#include "common/base/errors.h"
#include "common/base/fs_util.h"
#include "common/base/logging.h"
#include "common/config/config_file.h"
#include "common/run/checkpoint_manifest.h"
#include "common/training/checkpoint.h"
#include "common/training/stage_optimizer.h"

namespace up {
namespace {

namespace fs = std::filesystem;

template <typename Module>
void LoadHalf(const std::string& path, Module& module, const TrainConfig& train) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    throw UsageError("checkpoint file '" + path +
                     "' is missing; give a complete checkpoint (RUN/checkpoints/step-N)");
  }
  StageOptimizer scratch(*module, train);  // the file holds optimizer state too
  LoadStageFile(path, *module, scratch.optimizer());
}

}  // namespace

torch::Tensor TrainedModel::Logits(const torch::Tensor& images) {
  torch::NoGradGuard no_grad;
  return decoder->forward(encoder->forward(images))[0];  // (N, num_classes, *S)
}

TrainedModel LoadTrainedModel(const std::string& dir) {
  std::error_code ec;
  fs::path path = fs::path(dir).lexically_normal();
  if (!path.has_filename() && path.has_parent_path()) path = path.parent_path();  // "DIR/"
  TrainedModel m;
  if (fs::exists(path / "manifest.json", ec)) {
    const fs::path run = fs::absolute(path).parent_path().parent_path();
    if (!fs::exists(run / "config.yaml", ec)) {
      throw UsageError("--checkpoint " + dir + ": no config.yaml in '" + run.string() +
                       "', the run folder above this checkpoint; give a checkpoint inside its run");
    }
    m.config = LoadConfig((run / "config.yaml").string(), {});
    m.checkpoint_dir = path.string();
    m.step = ParseManifest(ReadFile((path / "manifest.json").string())).step;
  } else if (fs::exists(path / "config.yaml", ec)) {
    m.config = LoadConfig((path / "config.yaml").string(), {});
    const auto found =
        FindLatestCheckpoint(dir, m.config, [](const std::string& w) { LogWarn(w); });
    if (!found) {
      throw UsageError("--checkpoint " + dir +
                       ": this run has no complete checkpoint yet; train it further or give "
                       "another run");
    }
    m.checkpoint_dir = found->dir;
    m.step = found->step;
  } else {
    throw UsageError("--checkpoint " + dir +
                     ": neither a run folder (config.yaml) nor a checkpoint (manifest.json); give "
                     "a run's --out folder or its checkpoints/step-N");
  }
  m.encoder = UNetEncoder(m.config.model, 0);
  m.decoder = UNetDecoder(m.config.model, 0);
  const fs::path checkpoint(m.checkpoint_dir);
  if (!fs::exists(checkpoint / "encoder.pt", ec) && StageFileNames(m.config).size() > 2) {
    // A pipeline of more than two stages: one file per part.
    LoadWholeModel(m.config, m.checkpoint_dir, *m.encoder, *m.decoder);
  } else {
    LoadHalf((checkpoint / "encoder.pt").string(), m.encoder, m.config.train);
    LoadHalf((checkpoint / "decoder.pt").string(), m.decoder, m.config.train);
  }
  m.encoder->eval();
  m.decoder->eval();
  return m;
}

TrainedModel InitialModel(const std::string& dir) {
  std::error_code ec;
  const fs::path run = fs::path(dir);
  if (!fs::exists(run / "config.yaml", ec))
    throw UsageError("--initial --checkpoint " + dir + ": not a run folder (no config.yaml)");
  TrainedModel m;
  m.config = LoadConfig((run / "config.yaml").string(), {});
  m.checkpoint_dir = (run / "initial").string();
  m.encoder = MakeEncoder(m.config);
  m.decoder = MakeDecoder(m.config);
  m.encoder->eval();
  m.decoder->eval();
  return m;
}

}  // namespace up
