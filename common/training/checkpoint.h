// Checkpoints: `checkpoints/step-N/` holds one file per stage
// (`encoder.pt`, `decoder.pt`: that half's weights, buffers, optimizer state,
// step and RNG state; with more parts one per part, `encoder1.pt`,
// `encoder2.pt`, `decoder1.pt`, ..., each under the whole half's names) and
// `manifest.json` (step, config and model signatures,
// each file's size and sha256). A checkpoint is built in a staging folder,
// each file fsync'ed, the manifest written last, then the folder renamed to
// its final name and the parent fsync'ed: it is there whole or not at all.
//
// The reference trainer writes both stage files itself; in the pipeline each
// stage writes its own file into the staging folder and the launcher commits.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/config/config.h"
#include "common/training/loss_scale.h"

namespace up {

// sha256 over the model section: checkpoints of another architecture are refused.
std::string ModelSignature(const ModelConfig& model);

class UNetEncoderImpl;
class UNetDecoderImpl;

// The stage files of a pipeline checkpoint of `config` (its layout's stages
// in pipeline order: "encoder.pt", "decoder.pt" with one part each;
// "encoder1.pt", "encoder2.pt", "decoder1.pt", ... otherwise). The
// single-process trainer writes the two halves whole: "encoder.pt", "decoder.pt".
std::vector<std::string> StageFileNames(const Config& config);

// Loads the weights and buffers of checkpoint folder `dir` into the whole
// halves, whichever stages wrote it: the two halves' files, or one file per
// part (each loaded into its part, then copied by name). UsageError naming
// what is missing when the folder holds neither.
void LoadWholeModel(const Config& config, const std::string& dir, UNetEncoderImpl& encoder,
                    UNetDecoderImpl& decoder);

// UsageError unless checkpoint folder `dir` holds every file of `files`
// (a checkpoint written by a run in other stages than this one's).
void CheckStageFiles(const std::string& dir, const std::vector<std::string>& files);

// Stage files.
// With `loss_scale` (fp16 training) its scale and growth counter go in too.
void SaveStageFile(const std::string& path, torch::nn::Module& module,
                   torch::optim::Optimizer& optimizer, int64_t step,
                   const LossScale* loss_scale = nullptr);
// Loads into `module`/`optimizer` (which must have the architecture the file
// was written from) and returns the step stored.
// With `loss_scale`, restores the scale saved with the file (a file without
// one, from a run that did not use fp16, leaves it as it is).
int64_t LoadStageFile(const std::string& path, torch::nn::Module& module,
                      torch::optim::Optimizer& optimizer, LossScale* loss_scale = nullptr);

// The staging folder for step `step` under `run_dir` (created empty).
std::string BeginCheckpoint(const std::string& run_dir, int64_t step);
// Removes a staging folder on the way out unless CommitCheckpoint renamed it
// away: a checkpoint that failed (no space, a stage gone) leaves only the
// older, complete checkpoints behind.
class StagingCleanup {
 public:
  explicit StagingCleanup(std::string staging) : staging_(std::move(staging)) {}
  ~StagingCleanup();
  StagingCleanup(const StagingCleanup&) = delete;
  StagingCleanup& operator=(const StagingCleanup&) = delete;

 private:
  std::string staging_;
};
// Hashes the listed files in `staging`, writes the manifest, renames the
// folder to checkpoints/step-N and keeps only the newest `keep` checkpoints.
std::string CommitCheckpoint(const std::string& run_dir, const std::string& staging, int64_t step,
                             const std::vector<std::string>& files, const Config& config);

// Makes `checkpoints/best` the checkpoint of step `step` (which must be
// committed): its files hard-linked (copied where links fail) into
// `checkpoints/best-N`, then the symbolic link `best` swapped onto it with
// one rename, so a reader always finds a whole checkpoint there; the older
// best-* folders are removed. Survives checkpoint.keep pruning step-N.
// Returns the path of `best`.
std::string KeepBestCheckpoint(const std::string& run_dir, int64_t step);

struct CheckpointRef {
  int64_t step = 0;
  std::string dir;
};
// The newest checkpoint whose manifest and files verify and whose model
// signature matches `config`. Bad ones are reported through `warn` and
// skipped; one of another model is a UsageError. nullopt when there is none.
std::optional<CheckpointRef> FindLatestCheckpoint(
    const std::string& run_dir, const Config& config,
    const std::function<void(const std::string&)>& warn);

}  // namespace up
