// The encoder stage: the U-Net's levels down and bottleneck, its optimizer,
// and the actions the launcher asks of it.
//
//   F(m): load micro-batch m's images, forward, keep the boundary tensors
//         (and their graph) until B(m), copy them into the forward ring.
//   B(m): receive the gradients of the boundary tensors, run autograd from
//         the kept boundary with them. A skip tensor also feeds the next level
//         down, so autograd sums both gradients exactly as in one process.
//   S:    clip with the global norm (this stage's norms, then the decoder's)
//         and step.
//   VF(v): validation batch v: cut its windows from the validation case
//         (zero windows fill it to a micro-batch), forward in eval mode
//         without a graph, send the boundary. Nothing is kept.
// With `pipeline.activations: recompute`, F runs without a graph and keeps
// only the micro-batch's input (on the host); B re-runs the forward with
// gradients first, with BatchNorm's running statistics saved and restored
// around it so they end exactly as with `keep`.
// With parking on, the whole training state leaves the device between turns.
// A library first, so tests can run it in-process; main.cpp only starts it.
#pragma once

#include <map>
#include <optional>

#include "common/model/sliding_window.h"
#include "common/model/unet.h"
#include "stage/training_stage.h"

namespace up {

class EncoderStage : public stage::TrainingStage {
 public:
  EncoderStage(const Config& config, ipc::TensorSender& to_decoder,
               ipc::TensorReceiver& from_decoder);

  UNetEncoder& model() { return model_; }

 private:
  void RunAction(const ipc::Action& action, int64_t step, ipc::TurnReport* report) override;
  void BeginStep() override;
  void Forward(int64_t step, int micro_batch);
  void Backward(int64_t step, int micro_batch);
  Boundary Recompute(int micro_batch);  // the forward again, with a graph
  void ValForward(int64_t step, const ipc::Action& action);
  void SendBoundary(int64_t step, int micro_batch, const Boundary& out);

  ipc::TensorSender& to_decoder_;
  ipc::TensorReceiver& from_decoder_;
  UNetEncoder model_;  // the TrainingStage's module, typed
  bool recompute_;
  std::map<int, Boundary> kept_;         // keep: forwarded, waiting for their backward
  std::map<int, torch::Tensor> inputs_;  // recompute: (n, C, *S) inputs on the host
  // Validation: the case whose windows VF cuts, and its padded image.
  int64_t val_case_ = -1;
  std::optional<SlidingWindow> val_windows_;
  torch::Tensor val_image_;  // (1, C, *P) on the host
};

}  // namespace up
