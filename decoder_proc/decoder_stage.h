// The decoder stage: the U-Net's levels up and head, the loss, its optimizer,
// and the actions the launcher asks of it.
//
//   FB(m): receive micro-batch m's boundary (zero copy: the tensors view the
//          ring's slot, made autograd leaves), forward, loss (scaled by
//          1/micro_batches), backward, send the boundary's gradients, then
//          release the slot.
//   S:     clip with the global norm (the encoder's norms, then this
//          stage's) and step.
//   VP(v): validation batch v: receive its boundary, forward in eval mode
//          without a graph, blend the windows' logits into the case's
//          (Gaussian importance); after the case's last batch, its argmax
//          against the reference gives the case's counts in the report.
// On a GPU the received boundary is copied to the device first (the ring
// lives in host memory); with parking on, the training state leaves the
// device between turns.
// The turn's report carries the loss and the Dice counts of its micro-batches.
#pragma once

#include <optional>
#include <vector>

#include "common/model/loss.h"
#include "common/model/sliding_window.h"
#include "common/model/unet.h"
#include "stage/training_stage.h"

namespace up {

class DecoderStage : public stage::TrainingStage {
 public:
  DecoderStage(const Config& config, ipc::TensorSender& to_encoder,
               ipc::TensorReceiver& from_encoder);

  UNetDecoder& model() { return model_; }

 private:
  void RunAction(const ipc::Action& action, int64_t step, ipc::TurnReport* report) override;
  // Returns the micro-batch's scaled loss; adds its Dice counts.
  double ForwardBackward(int64_t step, int micro_batch, std::vector<int64_t>* dice_counts);
  void ValPredict(int64_t step, const ipc::Action& action, ipc::TurnReport* report);
  // Micro-batch `mb`'s boundary from the ring, checked against the spec:
  // on the CPU the tensors view the ring's slot until Release(*message).
  Boundary ReceiveBoundary(int64_t step, int mb, ipc::TensorMessage* message);

  ipc::TensorSender& to_encoder_;
  ipc::TensorReceiver& from_encoder_;
  UNetDecoder model_;  // the TrainingStage's module, typed
  BoundarySpec spec_;
  LossSpec loss_;
  std::optional<SlidingWindow> val_blend_;  // the validation case being predicted
};

}  // namespace up
