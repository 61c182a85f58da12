// A pipeline part's actions (common/layout/pipeline_layout.h): what every stage
// does with the tensors that flow through it, whichever half it runs. The
// encoder and decoder stages (encoder_proc/, decoder_proc/) add only how
// their half computes its levels (Compute).
//
//   F(m):  the part's inputs: micro-batch m's images (the first stage) or what
//          its upstream channels bring, checked against the layout (on the
//          CPU autograd leaves that view the ring's slot, kept until B(m));
//          forward; each downstream channel gets its tensors. keep: the graph
//          stays until B(m); recompute: no graph, only the inputs stay (the
//          first stage's images on the host).
//          With recompute, B's and FB's forward with a graph keeps only each
//          level's (pipeline.recompute_unit: block: each block's) input, and
//          backward rebuilds one unit's activations at a time
//          (level_checkpoint.h): the part's levels set that up from
//          recompute_unit(). With pipeline.offload the kept inputs wait in
//          host memory until their unit's backward (activation_offload.h).
//   B(m):  every downstream channel's gradients; with recompute the forward
//          again, BatchNorm's running statistics put back after it; backward
//          from every tensor sent, each with its gradient (a skip sent to two
//          stages gets both, summed by autograd as in one process); each
//          upstream channel gets its inputs' gradients; the slots go back.
//   FB(m): the last stage: receive, forward, the loss (scaled by
//          1/micro_batches; over its own heads and the logits sent by decoder
//          parts before it), backward, send the gradients.
//   VF(v): validation batch v through a stage before the last: the first
//          cuts the batch's windows from the case (zero windows fill it), the
//          others receive; eval mode, no graph; send; nothing kept.
//   VP(v): the last stage: receive, forward, blend the windows' logits into
//          the case's (Gaussian importance); after the case's last batch its
//          argmax against the reference gives the case's counts.
// S (clip with the global norm, step) is training_stage.h's. On a GPU the
// received tensors are copied to the device (the rings live in host memory).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "common/model/loss.h"
#include "common/model/sliding_window.h"
#include "common/model/unet.h"
#include "common/training/activation_parking.h"
#include "common/training/part_backward.h"
#include "stage/training_stage.h"

namespace up::stage {

class PartStage : public TrainingStage {
 protected:
  PartStage(const StageContext& ctx, std::shared_ptr<torch::nn::Module> module,
            const std::vector<int>& positions, int half_parameters);

  // The part's levels: from its inputs by wire name (the first stage's is
  // "images": (n, C, *S)) to every tensor its levels put out, by wire name.
  virtual PartTensors Compute(const PartTensors& inputs) = 0;
  // What the levels checkpoint when Compute runs with a graph: nothing with
  // pipeline.activations keep, else pipeline.recompute_unit's unit.
  CheckpointUnit recompute_unit() const;
  // pipeline.offload (activation_parking.h): where the levels park what
  // they keep, and how their inputs enter the device; off: nullptr, empty.
  ActivationOffload* offload() const { return parking_.offload(); }
  InputMover input_mover() const { return parking_.mover(); }

 private:
  // One channel of the layout, seen from this stage.
  struct Link {
    const StageChannel* channel;
    ipc::TensorSender* sender;      // downstream: forward; upstream: gradients
    ipc::TensorReceiver* receiver;  // downstream: gradients; upstream: forward
  };
  // A micro-batch's inputs on the host (received: views of the ring's slot on
  // the CPU) and the messages whose slots they view, released after the backward.
  struct Inputs {
    PartTensors host;  // by wire name; "images" for the first stage
    std::vector<std::pair<Link*, ipc::TensorMessage>> held;
  };
  struct Kept {
    Inputs inputs;
    PartTensors used;     // the inputs as the graph took them (leaves on the device)
    PartTensors outputs;  // with their graph (keep), or empty until B recomputes them
    // Offloaded: the outputs' places in the graph F built (their values
    // gone), and the handles of the unit inputs F parked.
    std::map<std::string, OutputEdge> edges;
    int parked_from = 0, parked_end = 0;
  };

  void RunAction(const ipc::Action& action, int64_t step, ipc::TurnReport* report) override;
  void BeginStep() override;
  void Forward(int64_t step, int micro_batch);
  void Backward(int64_t step, int micro_batch);
  double ForwardBackward(int64_t step, int micro_batch, std::vector<int64_t>* dice_counts);
  void ValForward(int64_t step, const ipc::Action& action);
  void ValPredict(int64_t step, const ipc::Action& action, ipc::TurnReport* report);

  // Micro-batch `mb`'s message from every upstream link, checked against the
  // layout, and parked (ParkReceived).
  Inputs Receive(int64_t step, int mb);
  ipc::TensorMessage ReceiveChecked(Link& link, int64_t step, int mb, ipc::Direction direction);
  // The inputs as the graph takes them (ActivationParking::Leaves);
  // `leaves`: received tensors require gradients.
  PartTensors OnDevice(const PartTensors& host, bool leaves) const;
  // The received inputs parked outside the turn (ActivationParking::Park).
  void ParkReceived(Inputs& inputs);
  // Each downstream link gets its tensors of `outputs`.
  void SendOutputs(int64_t step, int mb, const PartTensors& outputs);
  // Each upstream link gets the gradients of its tensors among `used`.
  void SendGradients(int64_t step, int mb, const PartTensors& used);
  // The forward again, with a graph, leaving BatchNorm's statistics as they are.
  PartTensors Recompute(const PartTensors& used);
  void Release(Inputs& inputs);  // the slots given back, the tensors dropped
  void ReleaseSlots(Inputs& inputs);

  std::vector<Link> upstream_, downstream_;
  bool recompute_;
  ActivationParking parking_;
  LossSpec loss_;
  std::map<int, Kept> kept_;  // forwarded, waiting for their backward
  // Validation: the first stage's case and its padded image; the last's blend.
  int64_t val_case_ = -1;
  std::optional<SlidingWindow> val_windows_;
  torch::Tensor val_image_;  // (1, C, *P) on the host
  std::optional<SlidingWindow> val_blend_;
};

}  // namespace up::stage
