// See level_checkpoint.h.
#include "common/model/level_checkpoint.h"

#include <ATen/autocast_mode.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/basic_ops.h>
#include <torch/csrc/autograd/variable.h>

#include <memory>

#include "common/model/activation_offload.h"
#include "common/model/precision.h"

namespace up {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// What backward needs to run the level again.
struct LevelCall : torch::CustomClassHolder {
  std::vector<torch::nn::Module*> modules;
  LevelFn fn;
  std::vector<torch::Tensor> params;  // the level's trainable parameters
  c10::DeviceType device_type = c10::DeviceType::CPU;
  bool autocast = false;
  at::ScalarType autocast_dtype = at::kFloat;
  ActivationOffload* offload = nullptr;  // the inputs in host memory, under `parked`
  int parked = -1;
  std::vector<bool> input_grad;  // which inputs need a gradient
};

// An input the graph just rebuilt does not save (a concatenation's: the skip
// a decoder level joins to its upsampled input) is needed after the rebuild
// only as the place its gradient is taken at, not for its values: its memory
// goes now, before the backward through the unit, instead of after it. A
// tensor is let go only when nothing but `in` and its gradient accumulator
// holds it and no other tensor shares its storage (a saved input is held by
// the graph too).
void ReleaseUnsaved(std::vector<torch::Tensor>* in) {
  for (torch::Tensor& t : *in) {
    if (!t.defined() || t.storage().use_count() != 1) continue;
    const bool accumulator = torch::autograd::impl::try_get_grad_accumulator(t) != nullptr;
    if (t.use_count() != 1 + (accumulator ? 1 : 0)) continue;
    t.set_data(torch::empty({0}, t.options()));
  }
}

// The root of a rebuilt unit's backward: hands the gradient entering the
// unit to the node that made its output, and keeps no reference to it.
struct GradientFeed : torch::autograd::Node {
  GradientFeed(torch::Tensor grad, torch::autograd::Edge next, const torch::Tensor& seed)
      : grad_(std::move(grad)) {
    add_input_metadata(seed);
    add_next_edge(std::move(next));
  }
  variable_list apply(variable_list&& /*seed*/) override { return {std::move(grad_)}; }
  torch::Tensor grad_;
};

// The gradients of `wrt` (undefined where the graph does not reach one) from
// the backward through the graph that made `out`, entered with `grad`: what
// torch::autograd::grad({out}, wrt, {grad}) returns, but without holding
// `out` or `grad` while it runs. The rebuilt output then goes once the node
// that saved it (the unit's last ReLU) has run, and the gradient once the
// first node has used it, instead of both lasting through the unit's
// backward: two tensors of the unit's output size fewer at its peak (the
// block's first convolution's backward).
variable_list BackwardFrom(torch::Tensor out, torch::Tensor grad, const variable_list& wrt) {
  using torch::autograd::Edge;
  TORCH_CHECK(out.requires_grad(), "a checkpointed unit's output needs a gradient");
  // The seed is the feed's input: a scalar, so that the engine has a defined one to check.
  const torch::Tensor seed = torch::zeros({}, grad.options());
  auto feed = std::make_shared<GradientFeed>(std::move(grad),
                                             torch::autograd::impl::gradient_edge(out), seed);
  out = torch::Tensor();
  torch::autograd::edge_list outputs;
  for (const torch::Tensor& t : wrt) {
    std::shared_ptr<torch::autograd::Node> fn = t.grad_fn();
    if (!fn) fn = torch::autograd::impl::try_get_grad_accumulator(t);
    if (!fn) {
      outputs.emplace_back(std::make_shared<torch::autograd::Identity>(), 0);  // unreachable
    } else {
      outputs.emplace_back(std::move(fn), t.output_nr());
    }
  }
  torch::autograd::edge_list roots{Edge(std::move(feed), 0)};
  return torch::autograd::Engine::get_default_engine().execute(roots, {seed}, /*keep_graph=*/false,
                                                               /*create_graph=*/false,
                                                               /*accumulate_grad=*/false, outputs);
}

struct Checkpoint : torch::autograd::Function<Checkpoint> {
  // The parameters are inputs too, so that the output needs a gradient even
  // where no input does (the first level's image) and their gradients come
  // back through autograd's own accumulation.
  static torch::Tensor forward(AutogradContext* ctx, c10::intrusive_ptr<LevelCall> call,
                               at::TensorList inputs, at::TensorList params) {
    // Autograd runs this without grad mode: no graph, nothing kept but the inputs.
    std::vector<torch::Tensor> in(inputs.begin(), inputs.end());
    torch::Tensor out = call->fn(in);
    for (const torch::Tensor& t : in) call->input_grad.push_back(t.requires_grad());
    if (call->offload) {
      call->parked = call->offload->Park(in);
    } else {
      ctx->save_for_backward(in);
    }
    ctx->saved_data["call"] = c10::IValue::make_capsule(call);
    ctx->saved_data["inputs"] = static_cast<int64_t>(in.size());
    return out;
  }

  // `grad_out` by reference: the gradient entering the unit moves out of the
  // list autograd passes (BackwardFrom).
  static variable_list backward(AutogradContext* ctx, variable_list& grad_out) {
    auto call = c10::static_intrusive_pointer_cast<LevelCall>(ctx->saved_data["call"].toCapsule());
    std::vector<torch::Tensor> kept =
        call->offload ? call->offload->Fetch(call->parked) : ctx->get_saved_variables();
    std::vector<torch::Tensor> in;
    for (size_t i = 0; i < kept.size(); ++i)
      in.push_back(kept[i].detach().requires_grad_(call->input_grad[i]));
    std::vector<torch::Tensor> params = call->params;
    // The forward already updated the running statistics; the recompute must
    // not. set_data, not copy_: the graph built below saved these buffers.
    std::vector<torch::Tensor> buffers;
    for (torch::nn::Module* m : call->modules) {
      for (const auto& b : m->buffers()) buffers.push_back(b.clone());
    }
    torch::Tensor out;
    {
      torch::AutoGradMode grad(true);
      // The autocast state the forward ran under, for its recompute.
      AutocastSetting autocast(call->device_type, call->autocast, call->autocast_dtype);
      out = call->fn(in);
    }
    if (call->offload) {
      kept.clear();  // the fetched copies are this backward's alone
      ReleaseUnsaved(&in);
    }
    size_t i = 0;
    for (torch::nn::Module* m : call->modules) {
      for (auto& b : m->buffers()) b.set_data(buffers[i++]);
    }
    std::vector<torch::Tensor> wrt;  // the inputs that need gradients, then the parameters
    for (const torch::Tensor& t : in) {
      if (t.requires_grad()) wrt.push_back(t);
    }
    const size_t input_grads = wrt.size();
    wrt.insert(wrt.end(), params.begin(), params.end());
    const variable_list g = BackwardFrom(std::move(out), std::move(grad_out[0]), wrt);
    variable_list grads{torch::Tensor()};  // none for `call`
    size_t k = 0;
    for (const torch::Tensor& t : in) grads.push_back(t.requires_grad() ? g[k++] : torch::Tensor());
    for (size_t p = 0; p < params.size(); ++p) grads.push_back(g[input_grads + p]);
    return grads;
  }
};

}  // namespace

torch::Tensor CheckpointedLevel(const std::vector<torch::nn::Module*>& modules, LevelFn fn,
                                const std::vector<torch::Tensor>& inputs,
                                ActivationOffload* offload) {
  if (!torch::GradMode::is_enabled()) return fn(inputs);
  auto call = c10::make_intrusive<LevelCall>();
  call->offload = offload;
  call->modules = modules;
  call->fn = std::move(fn);
  call->device_type = inputs.front().device().type();
  call->autocast = at::autocast::is_autocast_enabled(call->device_type);
  call->autocast_dtype = at::autocast::get_autocast_dtype(call->device_type);
  for (torch::nn::Module* m : modules) {
    for (const torch::Tensor& p : m->parameters()) {
      if (p.requires_grad()) call->params.push_back(p);
    }
  }
  const std::vector<torch::Tensor> params = call->params;
  return Checkpoint::apply(call, at::TensorList(inputs), at::TensorList(params));
}

}  // namespace up
