// How the level files of a bundle (torchscript_bundle.h) become modules: the
// one place that knows their file format.
//
// Today the format is TorchScript, loaded with torch::jit::load: the only
// format that LibTorch can train from. torch.jit is deprecated from PyTorch
// 2.15 on (it warns, and still works); a successor format is a second
// implementation of this interface, and nothing above it changes.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/formats/torchscript_bundle.h"

namespace up {

using LevelRun = std::function<torch::Tensor(const std::vector<torch::Tensor>&)>;

class LevelFormat {
 public:
  virtual ~LevelFormat() = default;
  // The level in `path` (described by `level`) as a module whose parameters
  // and buffers are the file's, named as in the file, and are what *run
  // computes with; train()/eval() on the module switch the level's mode.
  // UsageError naming the file when it does not load, or its inputs or
  // state are not the manifest's.
  virtual std::shared_ptr<torch::nn::Module> Load(const std::string& path, const BundleLevel& level,
                                                  LevelRun* run) const = 0;
};

// TorchScript (torch::jit). Graphs run unoptimised, op by op as eager
// PyTorch runs them: the same numbers in every process and in Python, and
// no fusion that would make the stages differ from the single-process trainer.
const LevelFormat& TorchscriptFormat();

}  // namespace up
