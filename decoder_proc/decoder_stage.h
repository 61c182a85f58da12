// The decoder stage: the U-Net's levels up and head, the loss, its optimizer,
// and the actions the launcher asks of it.
//
//   FB(m): receive micro-batch m's boundary (zero copy: the tensors view the
//          ring's slot, made autograd leaves), forward, loss (scaled by
//          1/micro_batches), backward, send the boundary's gradients, then
//          release the slot.
//   S:     clip with the global norm (the encoder's norms, then this
//          stage's) and step.
// On a GPU the received boundary is copied to the device first (the ring
// lives in host memory); with parking on, the training state leaves the
// device between turns.
// The turn's report carries the loss and the Dice counts of its micro-batches.
#pragma once

#include <memory>

#include "common/dataset.h"
#include "common/stage_optimizer.h"
#include "common/stage_parking.h"
#include "common/unet.h"
#include "ipc/stage_worker.h"

namespace up {

class DecoderStage : public ipc::StageWorker {
 public:
  DecoderStage(const Config& config, ipc::TensorSender& to_encoder,
               ipc::TensorReceiver& from_encoder);

  std::string BoundarySignature() const override;
  ipc::TurnReport RunTurn(const ipc::TurnRequest& turn) override;
  void Prefetch() override {
    if (parking_) parking_->Prefetch();
  }
  void Save(const ipc::SaveRequest& request) override;
  void Load(const std::string& path) override;

  torch::nn::Module& module() override { return *model_; }
  UNetDecoder& model() { return model_; }

 private:
  // Returns the micro-batch's scaled loss.
  double ForwardBackward(int64_t step, int micro_batch, std::vector<int64_t>* dice_counts);

  Config config_;
  ipc::TensorSender& to_encoder_;
  ipc::TensorReceiver& from_encoder_;
  torch::Device device_;
  UNetDecoder model_;
  StageOptimizer optimizer_;
  std::unique_ptr<StageParking> parking_;  // null when the stage keeps its device
  std::unique_ptr<Dataset> data_;
  BoundarySpec spec_;
  int64_t step_ = -1;
  int backward_done_ = 0;
};

}  // namespace up
