// Evaluation that leaves no trace on the training state: the module in eval
// mode for the scope (BatchNorm normalises with its running statistics and
// leaves them alone; dropout is off) and no autograd graph; its training
// mode comes back at the end.
#pragma once

#include <torch/torch.h>

namespace up {

class EvalMode {
 public:
  explicit EvalMode(torch::nn::Module& module) : module_(module), training_(module.is_training()) {
    module_.eval();
  }
  ~EvalMode() {
    if (training_) module_.train();
  }
  EvalMode(const EvalMode&) = delete;
  EvalMode& operator=(const EvalMode&) = delete;

 private:
  torch::nn::Module& module_;
  const bool training_;
  torch::NoGradGuard no_grad_;
};

}  // namespace up
