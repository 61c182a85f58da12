// The training state every stage holds and the turn loop they share: the
// stage's device, its part of the U-Net, its optimizer, its data, parking,
// and the handling of a turn's step action (the global gradient norm, the
// stages' norms in pipeline order). A role (encoder_proc/, decoder_proc/)
// adds only its own actions: F and B for the encoder, FB for the decoder,
// and their validation halves VF and VP.
//
// Lifetime: the module is built by the role, handed over here fresh on the
// CPU, moved to the stage's device before the optimizer sees it, and parked
// outside turns when pipeline.park says so. Not thread-safe: the stage's
// serving loop calls it from one thread.
#pragma once

#include <memory>
#include <string>

#include "common/config.h"
#include "common/data/batch_loader.h"
#include "common/data/dataset.h"
#include "common/data/validation_split.h"
#include "common/model/stage_optimizer.h"
#include "common/model/stage_parking.h"
#include "stage/stage_worker.h"

namespace up::stage {

enum class Role { kEncoder, kDecoder };

class TrainingStage : public StageWorker {
 public:
  std::string BoundarySignature() const override;
  // Resets per-step state when a new step begins, unparks for the turn, runs
  // the actions in order (S here, the rest through RunAction), parks again.
  ipc::TurnReport RunTurn(const ipc::TurnRequest& turn) final;
  void Prefetch() override;
  void Save(const ipc::SaveRequest& request) override;
  void Load(const std::string& path) override;
  torch::nn::Module& module() override { return *module_; }

 protected:
  // `module`: this stage's part of the U-Net, initialised on the CPU.
  TrainingStage(const Config& config, Role role, std::shared_ptr<torch::nn::Module> module);

  // Runs one action of the role's own (not S), adding to `report`.
  virtual void RunAction(const ipc::Action& action, int64_t step, ipc::TurnReport* report) = 0;
  // A new step begins: drop what the last one kept.
  virtual void BeginStep() {}
  // The role calls this after each micro-batch's backward; after the last
  // one the report carries this stage's per-parameter gradient norms.
  void BackwardDone(ipc::TurnReport* report);
  // The run's validation; RuntimeError naming `action` without data.validation.
  const ValidationSet& validation(const ipc::Action& action) const;
  // The error for an action this role does not run.
  [[noreturn]] void NotMine(const ipc::Action& action) const;

  const char* name() const { return role_ == Role::kEncoder ? "encoder" : "decoder"; }

  const Config config_;
  const Role role_;
  const torch::Device device_;
  const std::shared_ptr<torch::nn::Module> module_;
  StageOptimizer optimizer_;
  std::unique_ptr<StageParking> parking_;  // null when the stage keeps its device
  std::unique_ptr<Dataset> data_;
  std::unique_ptr<ValidationSet> validation_;  // null without data.validation
  std::unique_ptr<BatchLoader> loader_;        // this role's part of data_'s micro-batches

 private:
  void Step(const ipc::TurnRequest& turn, ipc::TurnReport* report);

  int64_t step_ = -1;  // the step whose gradients are accumulating
  int backward_done_ = 0;
};

}  // namespace up::stage
