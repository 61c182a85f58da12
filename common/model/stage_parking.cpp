// See stage_parking.h.
#include "common/model/stage_parking.h"

#include "common/model/device_memory.h"

namespace up {

StageParking::StageParking(torch::nn::Module& module, torch::optim::Optimizer& optimizer,
                           torch::Device device)
    : module_(module), optimizer_(optimizer), device_(device), copies_(device) {}

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

bool ShouldPark(const std::string& park, const torch::Device& device, bool shared, bool budgeted) {
  if (park == "always") return true;
  if (park == "never") return false;
  return (device.is_cuda() || budgeted) && shared;
}

bool ShouldPark(const std::string& park, const torch::Device& encoder, const torch::Device& decoder,
                bool budgeted) {
  return ShouldPark(park, encoder, encoder == decoder, budgeted);
}

void StageParking::Park() {
  if (parked_) return;
  if (!joined_) Unpark();  // a prefetch without a turn: settle it first
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
    parked_bytes_ += t.numel() * t.element_size();
  }
  // Device -> host after the turn's work; the host waits before the device
  // tensors are let go (their memory goes back to the driver).
  copies_.Run([&] {
    for (size_t i = 0; i < tensors.size(); ++i) host_[i].copy_(tensors[i], /*non_blocking=*/true);
  });
  copies_.Synchronize();
  for (size_t i = 0; i < tensors.size(); ++i) tensors[i].set_data(host_[i]);
  ReleaseCachedMemory(device_);
  parked_ = true;
}

void StageParking::Prefetch() {
  if (!parked_) return;
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> tensors = StateTensors(module_, optimizer_);
  // Fresh device tensors, allocated on the current stream (so freeing them
  // later is ordered with the work that uses them); the host buffers stay
  // for the next park.
  std::vector<torch::Tensor> fresh;
  for (const torch::Tensor& t : tensors) fresh.push_back(torch::empty_like(t, device_));
  copies_.Run([&] {
    for (size_t i = 0; i < tensors.size(); ++i) fresh[i].copy_(tensors[i], /*non_blocking=*/true);
  });
  for (size_t i = 0; i < tensors.size(); ++i) tensors[i].set_data(fresh[i]);
  parked_ = false;
  joined_ = false;
}

void StageParking::Unpark() {
  Prefetch();
  if (joined_) return;
  copies_.Join();  // the turn's work waits for copies still in flight
  joined_ = true;
}

}  // namespace up
