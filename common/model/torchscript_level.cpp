// The TorchScript level format; see level_format.h.
#include <torch/csrc/jit/python/update_graph_executor_opt.h>
#include <torch/script.h>

#include <set>

#include "common/base/errors.h"
#include "common/base/shape_text.h"
#include "common/model/level_format.h"
#include "common/model/tensor_file.h"

namespace up {
namespace {

// A scripted level as a torch::nn::Module: its parameters and buffers are
// registered under the script's own names (in child modules for each dotted
// part), sharing the script's tensors, so optimizers, parking (set_data),
// checkpoints and digests see exactly what the script computes with.
class ScriptedLevel : public torch::nn::Module {
 public:
  ScriptedLevel(torch::jit::Module script, const std::string& file)
      : script_(std::move(script)), file_(file) {
    // A module registered twice (dynamic_network_architectures' `all_modules`)
    // lists its tensors under both names: each is registered once, under its
    // first name, as Python's named_parameters() gives it.
    std::set<const c10::TensorImpl*> seen;
    for (const auto& p : script_.named_parameters(/*recurse=*/true)) {
      if (seen.insert(p.value.unsafeGetTensorImpl()).second)
        Owner(p.name)->register_parameter(Leaf(p.name), p.value, p.value.requires_grad());
    }
    for (const auto& b : script_.named_buffers(/*recurse=*/true)) {
      if (seen.insert(b.value.unsafeGetTensorImpl()).second)
        Owner(b.name)->register_buffer(Leaf(b.name), b.value);
    }
    train(true);
  }

  void train(bool on = true) override {
    torch::nn::Module::train(on);
    script_.train(on);
  }

  torch::Tensor Run(const std::vector<torch::Tensor>& inputs) {
    std::vector<c10::IValue> args(inputs.begin(), inputs.end());
    c10::IValue out = script_.forward(std::move(args));
    if (!out.isTensor())
      throw RuntimeError(file_ + ": returned " + out.tagKind() + ", not one tensor");
    return out.toTensor();
  }

  size_t Arity() {
    return script_.get_method("forward").function().getSchema().arguments().size() - 1;  // self
  }

 private:
  static std::string Leaf(const std::string& name) { return name.substr(name.rfind('.') + 1); }

  // The child module that holds `name`'s last part, made on the way.
  torch::nn::Module* Owner(const std::string& name) {
    torch::nn::Module* at = this;
    size_t start = 0;
    for (size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', start)) {
      const std::string part = name.substr(start, dot - start);
      std::shared_ptr<torch::nn::Module> child;
      for (const auto& c : at->named_children())
        if (c.key() == part) child = c.value();
      if (!child) child = at->register_module(part, std::make_shared<torch::nn::Module>());
      at = child.get();
      start = dot + 1;
    }
    return at;
  }

  torch::jit::Module script_;
  std::string file_;
};

class Torchscript : public LevelFormat {
 public:
  std::shared_ptr<torch::nn::Module> Load(const std::string& path, const BundleLevel& level,
                                          LevelRun* run) const override {
    // Eager semantics, op by op: no profiling, no fusion, no autodiff graphs.
    torch::jit::setGraphExecutorOptimize(false);
    const std::string where = "model.path: " + level.file;
    torch::jit::Module script;
    try {
      script = torch::jit::load(path, torch::kCPU);
    } catch (const std::exception& e) {
      const std::string what = e.what();
      throw UsageError(where + ": not a TorchScript file LibTorch " + TORCH_VERSION + " loads (" +
                       what.substr(0, what.find('\n')) +
                       "); re-export it with scripts/export_unet.py");
    }
    auto level_module = std::make_shared<ScriptedLevel>(std::move(script), level.file);
    if (level_module->Arity() != level.inputs.size())
      throw UsageError(where + ": its forward takes " + std::to_string(level_module->Arity()) +
                       " tensors, the manifest says " + std::to_string(level.inputs.size()));
    std::map<std::string, torch::Tensor> state;
    for (const auto& p : level_module->named_parameters()) state[p.key()] = p.value();
    for (const auto& b : level_module->named_buffers()) state[b.key()] = b.value();
    if (state.size() != level.state.size())
      throw UsageError(where + ": holds " + std::to_string(state.size()) +
                       " parameters and buffers, the manifest lists " +
                       std::to_string(level.state.size()) + "; the file is not the one exported");
    for (const BundleTensor& t : level.state) {
      auto it = state.find(t.name);
      if (it == state.end())
        throw UsageError(where + ": has no " + t.name + ", which the manifest lists");
      const torch::Tensor& v = it->second;
      if (v.sizes().vec() != t.shape || DTypeName(v.scalar_type()) != t.dtype)
        throw UsageError(where + ": " + t.name + " is " + ShapeText(v.sizes().vec()) + " " +
                         DTypeName(v.scalar_type()) + ", the manifest says " + ShapeText(t.shape) +
                         " " + t.dtype);
    }
    ScriptedLevel* raw = level_module.get();
    *run = [raw](const std::vector<torch::Tensor>& x) { return raw->Run(x); };
    return level_module;
  }
};

}  // namespace

const LevelFormat& TorchscriptFormat() {
  static const Torchscript format;
  return format;
}

}  // namespace up
