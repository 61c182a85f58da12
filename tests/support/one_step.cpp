// See one_step.h.
#include "tests/support/one_step.h"

#include <gtest/gtest.h>

#include "common/device/tensor_accounting.h"
#include "common/model/activation_offload.h"
#include "common/model/precision.h"

namespace up::test {

OneStep ForwardBackward(UNet model, CheckpointUnit unit, Precision precision,
                        std::vector<int64_t> shape, int64_t classes, bool offload) {
  model->encoder->set_checkpointing(unit);
  model->decoder->set_checkpointing(unit);
  ActivationOffload parked(torch::Device(torch::kCPU));
  if (offload) {
    model->encoder->set_offload(&parked);
    model->decoder->set_offload(&parked);
  }
  model->train();
  torch::manual_seed(3);
  const torch::Tensor x = torch::randn(shape);  // (N, C, *S)
  shape.erase(shape.begin() + 1);
  const torch::Tensor target = torch::randint(0, classes, shape);  // (N, *S)
  const torch::Device cpu(torch::kCPU);
  TrainConfig t;
  t.precision = precision;
  const int64_t before = TensorBytesOn(cpu).live;
  ResetPeakTensorBytes(cpu);
  torch::Tensor loss;
  {
    AutocastScope autocast(t, cpu);
    const std::vector<torch::Tensor> out = model->forward(x);
    loss = torch::nn::functional::cross_entropy(out[0], target);
    for (size_t i = 1; i < out.size(); ++i)
      if (out[i].defined()) loss = loss + out[i].to(torch::kFloat32).square().mean();
  }
  loss.backward();
  OneStep r;
  r.peak_bytes = TensorBytesOn(cpu).peak - before;
  if (offload) {
    EXPECT_GT(parked.copied_out_bytes(), 0);
    EXPECT_EQ(parked.copied_in_bytes(), parked.copied_out_bytes()) << "each unit fetched once";
    parked.Clear();
    EXPECT_EQ(parked.parked_bytes(), 0);
  }
  model->encoder->set_offload(nullptr);
  model->decoder->set_offload(nullptr);
  r.state = NamedState(*model);
  for (const auto& p : model->parameters()) r.grads.push_back(p.grad());
  return r;
}

}  // namespace up::test
