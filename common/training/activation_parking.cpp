// See activation_parking.h.
#include "common/training/activation_parking.h"

#include "common/device/tensor_accounting.h"

namespace up::stage {

ActivationParking::ActivationParking(const Config& config, const torch::Device& device)
    : device_(device) {
  if (config.pipeline.offload == OnOff::kOn) offload_ = std::make_unique<ActivationOffload>(device);
}

InputMover ActivationParking::mover() const {
  if (!on()) return {};
  return [this](const torch::Tensor& t) { return ToDevice(t); };
}

torch::Tensor ActivationParking::ToDevice(const torch::Tensor& t) const {
  if (!on()) return t;  // Leaves put it there already
  if (!device_.is_cpu()) return t.device() == device_ ? t : t.to(device_, /*non_blocking=*/true);
  // On a CPU device a parked input is outside the count: entering the device
  // is a counted copy, as the host-to-device copy is on a GPU.
  return CountedByAccounting(t) ? t : t.clone();
}

void ActivationParking::Park(PartTensors* host, const std::function<void()>& release) const {
  if (!on() || !device_.is_cpu() || host->empty()) return;
  PartTensors parked;
  for (const auto& [name, t] : *host) parked[name] = UncountedCopy(t);
  release();
  *host = std::move(parked);
}

void ActivationParking::ParkGradients(std::vector<torch::Tensor>* grads,
                                      const std::function<void()>& release) const {
  if (!on() || !device_.is_cpu() || grads->empty()) return;
  for (torch::Tensor& g : *grads) g = UncountedCopy(g);
  release();
}

torch::Tensor ActivationParking::GradientToDevice(const torch::Tensor& g) const {
  if (on() && device_.is_cpu()) return ToDevice(g);
  return g.to(device_);
}

PartTensors ActivationParking::Leaves(const PartTensors& host, bool leaves) const {
  PartTensors out;
  for (const auto& [name, t] : host) {
    // On the CPU a received tensor is used where it lies (the ring's slot, or
    // its parked copy); on a GPU it is copied in now, or as its level starts.
    torch::Tensor d = device_.is_cpu() || on() ? t : t.to(device_);
    // Autograd leaves: their gradients are what goes back upstream.
    if (leaves && name != kImages) d.requires_grad_(true);
    out[name] = d;
  }
  return out;
}

void ActivationParking::EndBackward() const {
  if (offload_) offload_->Clear();
}

}  // namespace up::stage
