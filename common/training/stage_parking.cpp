// See stage_parking.h.
#include "common/training/stage_parking.h"

#include "common/base/trace.h"
#include "common/device/device_memory.h"

namespace up {

StageParking::StageParking(torch::nn::Module& module, torch::optim::Optimizer& optimizer,
                           torch::Device device)
    : module_(module), optimizer_(optimizer), device_(device), copies_(device) {}

namespace {

// Where a tensor sits in the training state, so that its parking buffer is
// found again however many tensors exist (gradients come and go, the
// optimizer's state appears at its first step): a parameter's tensors by
// the parameter's position and their role, buffers by position.
enum Role : int64_t { kParam, kGrad, kExpAvg, kExpAvgSq, kMaxExpAvgSq, kMomentum, kBuffer };

struct StateTensor {
  int64_t key;
  Role role;
  bool optimizer;  // the optimizer's state (else the model's: weights, gradients, buffers)
  torch::Tensor t;
};

// Every tensor of the training state, in a fixed order.
std::vector<StateTensor> StateTensors(torch::nn::Module& module,
                                      torch::optim::Optimizer& optimizer) {
  // Handles share their tensor's implementation, so set_data on a handle
  // moves the tensor the module and the optimizer hold.
  std::vector<StateTensor> out;
  int64_t index = 0;
  for (auto& group : optimizer.param_groups()) {
    for (auto& p : group.params()) {
      const int64_t base = kBuffer * index++;  // kBuffer: the roles a parameter has
      out.push_back({base + kParam, kParam, false, p});
      if (p.grad().defined()) out.push_back({base + kGrad, kGrad, false, p.grad()});
      auto it = optimizer.state().find(p.unsafeGetTensorImpl());
      if (it == optimizer.state().end()) continue;
      if (auto* adam = dynamic_cast<torch::optim::AdamParamState*>(it->second.get())) {
        const std::pair<Role, torch::Tensor> moments[] = {{kExpAvg, adam->exp_avg()},
                                                          {kExpAvgSq, adam->exp_avg_sq()},
                                                          {kMaxExpAvgSq, adam->max_exp_avg_sq()}};
        for (const auto& [role, t] : moments) {
          if (t.defined()) out.push_back({base + role, role, true, t});
        }
      } else if (auto* sgd = dynamic_cast<torch::optim::SGDParamState*>(it->second.get())) {
        if (sgd->momentum_buffer().defined())
          out.push_back({base + kMomentum, kMomentum, true, sgd->momentum_buffer()});
      }
    }
  }
  int64_t b = 0;
  for (const auto& t : module.buffers(/*recurse=*/true)) out.push_back({-++b, kBuffer, false, t});
  return out;
}

bool SameLayout(const torch::Tensor& a, const torch::Tensor& b) {
  return a.defined() && a.sizes() == b.sizes() && a.strides() == b.strides() &&
         a.dtype() == b.dtype();
}

}  // namespace

void MoveTrainingState(torch::nn::Module& module, torch::optim::Optimizer& optimizer,
                       torch::Device device) {
  torch::NoGradGuard no_grad;
  for (StateTensor& s : StateTensors(module, optimizer)) {
    if (s.t.device() != device) s.t.set_data(s.t.to(device));
  }
}

bool ShouldPark(Park park, const torch::Device& device, bool shared, bool budgeted) {
  if (park == Park::kAlways) return true;
  if (park == Park::kNever) return false;
  return (device.is_cuda() || budgeted) && shared;
}

bool ShouldPark(Park park, const torch::Device& encoder, const torch::Device& decoder,
                bool budgeted) {
  return ShouldPark(park, encoder, encoder == decoder, budgeted);
}

void StageParking::Park() {
  if (parked_ && optimizer_parked_) return;
  TraceSpan span(trace_event::kPark, "copy");
  if (!joined_) {  // a prefetch without a turn: settle it first
    copies_.Join();
    joined_ = true;
  }
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> from, to;                        // device -> host copies
  std::vector<std::pair<torch::Tensor, torch::Tensor>> back;  // unchanged: back to their source
  // The optimizer's state came for a step: the weights changed with it
  // (LibTorch's optimizers write through .data(), which their version
  // counters do not see).
  const bool stepped = !optimizer_parked_;
  parked_bytes_ = 0;
  for (StateTensor& s : StateTensors(module_, optimizer_)) {
    parked_bytes_ += static_cast<int64_t>(s.t.nbytes());
    if (s.optimizer ? optimizer_parked_ : parked_) continue;  // in host memory already
    Slot& slot = slots_[s.key];
    // A weight the turn did not change goes back to the host data it came
    // from. Gradients, buffers (running statistics, written unseen by the
    // version counter) and the optimizer's state are copied.
    if (s.role == kParam && !stepped && slot.fetched.lock().get() == s.t.unsafeGetTensorImpl() &&
        SameLayout(slot.source, s.t) && slot.version == s.t._version()) {
      back.emplace_back(s.t, slot.source);
      continue;
    }
    if (!SameLayout(slot.host, s.t)) slot.host = EmptyHostLike(s.t);
    slot.source = slot.host;
    from.push_back(s.t);
    to.push_back(slot.host);
    bytes_out_ += static_cast<int64_t>(s.t.nbytes());
  }
  // Device -> host after the turn's work; the host waits before the device
  // tensors are let go (their memory goes back to the driver).
  copies_.Run([&] {
    for (size_t i = 0; i < from.size(); ++i) to[i].copy_(from[i], /*non_blocking=*/true);
  });
  copies_.Synchronize();
  for (size_t i = 0; i < from.size(); ++i) from[i].set_data(to[i]);
  for (auto& [t, source] : back) t.set_data(source);
  ReleaseCachedMemory(device_);
  parked_ = true;
  optimizer_parked_ = true;
}

void StageParking::Fetch(bool optimizer) {
  torch::NoGradGuard no_grad;
  std::vector<StateTensor> state;
  for (StateTensor& s : StateTensors(module_, optimizer_)) {
    if (s.optimizer == optimizer) state.push_back(s);
  }
  // Fresh device tensors, allocated on the current stream (so freeing them
  // later is ordered with the work that uses them); the host buffers stay
  // for the next park.
  std::vector<torch::Tensor> fresh;
  for (const StateTensor& s : state) fresh.push_back(torch::empty_like(s.t, device_));
  copies_.Run([&] {
    for (size_t i = 0; i < state.size(); ++i) fresh[i].copy_(state[i].t, /*non_blocking=*/true);
  });
  for (size_t i = 0; i < state.size(); ++i) {
    Slot& slot = slots_[state[i].key];
    slot.source = state[i].t.variable_data();  // the host data, kept for an unchanged park
    state[i].t.set_data(fresh[i]);
    slot.fetched = ImplPtr(state[i].t.getIntrusivePtr());
    slot.version = state[i].t._version();
    bytes_in_ += static_cast<int64_t>(fresh[i].nbytes());
  }
}

void StageParking::Prefetch() {
  if (!parked_) return;
  TraceSpan span(trace_event::kUnpark, "copy");
  Fetch(/*optimizer=*/false);
  parked_ = false;
  joined_ = false;
}

void StageParking::Unpark() {
  Prefetch();
  if (joined_) return;
  copies_.Join();  // the turn's work waits for copies still in flight
  joined_ = true;
}

void StageParking::UnparkOptimizer() {
  Unpark();
  if (!optimizer_parked_) return;
  TraceSpan span(trace_event::kUnparkOptimizer, "copy");
  Fetch(/*optimizer=*/true);
  copies_.Join();
  optimizer_parked_ = false;
}

}  // namespace up
