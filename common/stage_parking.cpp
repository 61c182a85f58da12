// See stage_parking.h.
#include "common/stage_parking.h"

#include "common/device_memory.h"

namespace up {

StageParking::StageParking(torch::nn::Module& module, torch::optim::Optimizer& optimizer,
                           torch::Device device)
    : module_(module), optimizer_(optimizer), device_(device) {}

namespace {

// Every tensor of the training state, in a fixed order.
std::vector<torch::Tensor> StateTensors(torch::nn::Module& module,
                                        torch::optim::Optimizer& optimizer) {
  // Handles share their tensor's implementation, so set_data on a handle
  // moves the tensor the module and the optimizer hold.
  std::vector<torch::Tensor> out;
  for (auto& group : optimizer.param_groups()) {
    for (auto& p : group.params()) {
      out.push_back(p);
      if (p.grad().defined()) out.push_back(p.grad());
      auto it = optimizer.state().find(p.unsafeGetTensorImpl());
      if (it == optimizer.state().end()) continue;
      if (auto* adam = dynamic_cast<torch::optim::AdamParamState*>(it->second.get())) {
        for (const torch::Tensor& t :
             {adam->exp_avg(), adam->exp_avg_sq(), adam->max_exp_avg_sq()}) {
          if (t.defined()) out.push_back(t);
        }
      } else if (auto* sgd = dynamic_cast<torch::optim::SGDParamState*>(it->second.get())) {
        if (sgd->momentum_buffer().defined()) out.push_back(sgd->momentum_buffer());
      }
    }
  }
  for (const auto& b : module.buffers(/*recurse=*/true)) out.push_back(b);
  return out;
}

}  // namespace

void MoveTrainingState(torch::nn::Module& module, torch::optim::Optimizer& optimizer,
                       torch::Device device) {
  torch::NoGradGuard no_grad;
  for (torch::Tensor& t : StateTensors(module, optimizer)) {
    if (t.device() != device) t.set_data(t.to(device));
  }
}

bool ShouldPark(const std::string& park, const torch::Device& encoder,
                const torch::Device& decoder) {
  if (park == "always") return true;
  if (park == "never") return false;
  return encoder.is_cuda() && encoder == decoder;
}

void StageParking::Park() {
  if (parked_) return;
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> tensors = StateTensors(module_, optimizer_);
  // Which tensors exist changes as training goes (gradients, optimizer state
  // appear after the first step): buffers are matched by position and size.
  if (host_.size() < tensors.size()) host_.resize(tensors.size());
  parked_bytes_ = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const torch::Tensor& t = tensors[i];
    if (!host_[i].defined() || host_[i].sizes() != t.sizes() || host_[i].dtype() != t.dtype()) {
      host_[i] = EmptyHostLike(t);
    }
    host_[i].copy_(t, /*non_blocking=*/true);
    parked_bytes_ += t.numel() * t.element_size();
  }
  if (device_.is_cuda()) torch::cuda::synchronize(device_.index());
  for (size_t i = 0; i < tensors.size(); ++i) tensors[i].set_data(host_[i]);
  ReleaseCachedMemory(device_);
  parked_ = true;
}

void StageParking::Unpark() {
  if (!parked_) return;
  torch::NoGradGuard no_grad;
  for (torch::Tensor& t : StateTensors(module_, optimizer_)) {
    // A fresh device tensor; the host buffer stays for the next park.
    t.set_data(device_.is_cuda() ? t.to(device_, /*non_blocking=*/true) : t.clone());
  }
  parked_ = false;
}

}  // namespace up
