// The training state every stage holds and the turn loop they share: the
// stage's device, its part of the U-Net, its optimizer, its data, parking,
// and the handling of a turn's step action (the global gradient norm over
// every stage's norms, in the whole model's parameter order). A part's
// actions (F, B, FB, VF, VP) are part_stage.h's.
//
// Lifetime: the module is built by the role, handed over here fresh on the
// CPU, moved to the stage's device before the optimizer sees it, and parked
// outside turns when pipeline.park says so. Not thread-safe: the stage's
// serving loop calls it from one thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/config/config.h"
#include "common/data/batch_loader.h"
#include "common/data/dataset.h"
#include "common/data/validation_split.h"
#include "common/layout/pipeline_layout.h"
#include "common/training/stage_optimizer.h"
#include "common/training/stage_parking.h"
#include "stage/replica_group.h"
#include "stage/stage_worker.h"

namespace up::stage {

class TrainingStage : public StageWorker {
 public:
  std::string BoundarySignature() const override;
  std::vector<int32_t> ParameterPositions() const override { return positions_; }
  int HalfParameters() const override { return half_parameters_; }
  // Resets per-step state when a new step begins, unparks for the turn, runs
  // the actions in order (S here, the rest through RunAction), parks again.
  ipc::TurnReport RunTurn(const ipc::TurnRequest& turn) final;
  void Prefetch() override;
  // Loads the next step's micro-batches (BatchLoader::LoadAhead) while the
  // other stages hold their turns.
  void Idle() override;
  void Save(const ipc::SaveRequest& request) override;
  void Load(const std::string& path) override;
  torch::nn::Module& module() override { return *module_; }
  void JoinReplicas(const ReplicaGroupOptions& options) override;

 protected:
  // `module`: stage `index` of `layout`'s part of the U-Net, initialised on
  // the CPU; `positions`: where each of its parameters stands in its half,
  // which has `half_parameters` in all.
  // `replica`: which copy of the pipeline it belongs to (its micro-batches
  // of each batch, its key "encoder.r1").
  TrainingStage(const Config& config, const PipelineLayout& layout, int index,
                std::shared_ptr<torch::nn::Module> module, const std::vector<int>& positions,
                int half_parameters, int replica = 0);

  // Runs one action of the part's own (not S), adding to `report`.
  virtual void RunAction(const ipc::Action& action, int64_t step, ipc::TurnReport* report) = 0;
  // A new step begins: drop what the last one kept.
  virtual void BeginStep() {}
  // The part calls this after each micro-batch's backward; after the last
  // one the report carries this stage's per-parameter gradient norms.
  void BackwardDone(ipc::TurnReport* report);
  // Micro-batch `mb` of `step` from the loader, as the device takes it: on a
  // CPU device one loaded ahead (outside the count, as host memory) enters
  // the count as a copy, as it would be copied onto a GPU.
  MicroBatch Batch(int64_t step, int mb);
  // The run's validation; RuntimeError naming `action` without data.validation.
  const ValidationSet& validation(const ipc::Action& action) const;
  // The error for an action this stage does not run.
  [[noreturn]] void NotMine(const ipc::Action& action) const;

  bool first() const { return spec_.index == 0; }
  bool last() const { return spec_.index == layout_.size() - 1; }
  // For test hooks and recordings ("encoder", "decoder2"); name() for messages.
  const std::string& key() const { return key_; }
  const std::string& name() const { return name_; }

  const Config config_;
  const PipelineLayout layout_;
  const StageSpec spec_;
  const torch::Device device_;
  const std::shared_ptr<torch::nn::Module> module_;
  StageOptimizer optimizer_;
  std::unique_ptr<StageParking> parking_;      // null when the stage keeps its device
  std::unique_ptr<Dataset> data_;              // the first stage's images, the last one's masks
  std::unique_ptr<ValidationSet> validation_;  // null without data.validation
  std::unique_ptr<BatchLoader> loader_;        // null for a stage in the middle
  std::unique_ptr<ReplicaGroup> replicas_;     // null with one replica

 private:
  void Step(const ipc::TurnRequest& turn, ipc::TurnReport* report);
  void Report(const StageOptimizer::Outcome& outcome, ipc::TurnReport* report);

  const std::string key_, name_;
  const std::vector<int32_t> positions_;
  const int half_parameters_;
  int64_t step_ = -1;  // the step whose gradients are accumulating
  int backward_done_ = 0;
};

}  // namespace up::stage
