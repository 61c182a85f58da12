// See level_timing.h.
#include "common/model/level_timing.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>

#include "common/device/device_memory.h"
#include "common/model/loss.h"
#include "common/model/precision.h"
#include "common/model/unet.h"

namespace up {
namespace {

// The median of `repeats` runs of `step` after one to warm up, in ms.
double MedianMs(const torch::Device& device, int repeats, const std::function<void()>& step) {
  std::vector<double> ms;
  for (int i = 0; i <= std::max(1, repeats); ++i) {
    SynchronizeDevice(device);
    const auto start = std::chrono::steady_clock::now();
    step();
    SynchronizeDevice(device);
    const double t =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (i > 0) ms.push_back(t);  // the first warms up (allocator, kernels)
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

CheckpointUnit PartUnit(const Config& config) {
  return config.pipeline.activations == Activations::kRecompute
             ? CheckpointUnitOf(config.pipeline.recompute_unit)
             : CheckpointUnit::kNone;
}

// A leaf copy of `t` that takes a gradient, as a part's received input does.
torch::Tensor Input(const torch::Tensor& t) { return t.detach().clone().requires_grad_(true); }

std::vector<int64_t> ImageShape(const Config& config) {
  std::vector<int64_t> shape{MicroBatchSamples(config), config.model.in_channels};
  for (int s : config.data.size) shape.push_back(s);
  return shape;
}

}  // namespace

std::vector<double> TimeEncoderLevels(const Config& config, const torch::Device& device,
                                      int repeats) {
  const int top = Geometry(config.model).levels();  // the bottleneck
  std::vector<double> out;
  torch::manual_seed(config.train.seed);
  torch::Tensor x = torch::randn(ImageShape(config), torch::TensorOptions(device));
  for (int level = 0; level <= top; ++level) {
    UNetEncoder part = MakeEncoderPart(config, level, level);
    part->to(device);
    part->set_checkpointing(PartUnit(config));
    const torch::Tensor in = level == 0 ? x : Input(x);  // the images take no gradient
    torch::Tensor next;
    out.push_back(MedianMs(device, repeats, [&] {
      torch::Tensor y;
      {
        AutocastScope autocast(config.train, device);
        y = part->ForwardPart(in).begin()->second;  // (N, F[level], S / scale[level])
      }
      y.backward(torch::ones_like(y));
      next = y.detach();
    }));
    x = next;
  }
  return out;
}

std::vector<double> TimeDecoderLevels(const Config& config, const torch::Device& device,
                                      int repeats) {
  const int L = Geometry(config.model).levels();
  torch::manual_seed(config.train.seed);
  // The boundary the decoder takes: the encoder's own, run once.
  PartTensors boundary;
  {
    UNetEncoder encoder = MakeEncoder(config);
    encoder->to(device);
    torch::NoGradGuard no_grad;
    AutocastScope autocast(config.train, device);
    boundary = encoder->ForwardPart(torch::randn(ImageShape(config), torch::TensorOptions(device)));
  }
  std::vector<int64_t> label_shape{MicroBatchSamples(config)};
  for (int s : config.data.size) label_shape.push_back(s);
  const torch::Tensor target =
      torch::randint(MaskClasses(config.model), label_shape,
                     torch::TensorOptions(device).dtype(torch::kLong));  // (N, *S)
  LossSpec spec = MakeLossSpec(config);
  spec.weights = {1.0};  // the full-resolution output's; the coarser ones get a gradient as given

  std::vector<double> out(static_cast<size_t>(L), 0.0);
  torch::Tensor below = boundary.at("bottleneck");
  for (int level = L - 1; level >= 0; --level) {
    UNetDecoder part = MakeDecoderPart(config, level, level);
    part->to(device);
    part->set_checkpointing(PartUnit(config));
    const std::string idx = std::to_string(level);
    const PartTensors in{
        {level == L - 1 ? std::string("bottleneck") : "up" + std::to_string(level + 1),
         Input(below)},
        {"skip" + idx, Input(boundary.at("skip" + idx))}};
    torch::Tensor next;
    out[static_cast<size_t>(level)] = MedianMs(device, repeats, [&] {
      PartTensors y;
      torch::Tensor loss;
      {
        AutocastScope autocast(config.train, device);
        y = part->ForwardPart(in);
        if (level == 0) loss = SegmentationLoss({y.at("logits0")}, target, spec);
      }
      std::vector<torch::Tensor> roots, grads;
      for (const auto& [name, t] : y) {
        if (name == "logits0") continue;
        roots.push_back(t);
        grads.push_back(torch::ones_like(t));
      }
      if (loss.defined()) {
        roots.push_back(loss);
        grads.push_back(torch::ones_like(loss));
      }
      torch::autograd::backward(roots, grads);
      if (level > 0) next = y.at("up" + idx).detach();
    });
    below = next;
  }
  return out;
}

}  // namespace up
