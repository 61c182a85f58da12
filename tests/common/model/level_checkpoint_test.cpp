// train.checkpointing: levels. Recomputing each level in backward gives the
// gradients and BatchNorm running statistics of plain training bit for bit
// (fp32 and bf16 autocast), and keeps fewer tensor bytes at the peak.
#include "common/model/level_checkpoint.h"

#include <gtest/gtest.h>

#include "common/model/precision.h"
#include "common/model/tensor_accounting.h"
#include "common/model/unet.h"

namespace up {
namespace {

ModelConfig Model() {
  ModelConfig m;
  m.features = {8, 16, 32};
  m.norm = "batch";
  return m;
}

struct Trained {
  std::vector<std::pair<std::string, torch::Tensor>> state;  // parameters and buffers
  std::vector<torch::Tensor> grads;
  int64_t peak_bytes = 0;  // above what was live before the forward
};

Trained TrainOnce(bool checkpointing, const std::string& precision) {
  UNet model(Model(), 7);
  model->encoder->set_checkpointing(checkpointing);
  model->decoder->set_checkpointing(checkpointing);
  model->train();
  torch::manual_seed(3);
  const torch::Tensor x = torch::randn({4, 4, 64, 64});
  const torch::Tensor target = torch::randint(0, 3, {4, 64, 64});
  const torch::Device cpu(torch::kCPU);
  TrainConfig t;
  t.precision = precision;
  const int64_t before = TensorBytesOn(cpu).live;
  ResetPeakTensorBytes(cpu);
  torch::Tensor loss;
  {
    AutocastScope autocast(t, cpu);
    loss = torch::nn::functional::cross_entropy(model->forward(x)[0], target);
  }
  loss.backward();
  Trained r;
  r.peak_bytes = TensorBytesOn(cpu).peak - before;
  r.state = NamedState(*model);
  for (const auto& p : model->parameters()) r.grads.push_back(p.grad());
  return r;
}

void ExpectSame(const Trained& plain, const Trained& ckpt) {
  ASSERT_EQ(plain.grads.size(), ckpt.grads.size());
  for (size_t i = 0; i < plain.grads.size(); ++i) {
    ASSERT_TRUE(ckpt.grads[i].defined()) << "parameter " << i << " got no gradient";
    EXPECT_TRUE(torch::equal(plain.grads[i], ckpt.grads[i])) << "gradient " << i;
  }
  for (size_t i = 0; i < plain.state.size(); ++i) {
    EXPECT_TRUE(torch::equal(plain.state[i].second, ckpt.state[i].second))
        << plain.state[i].first << " (running statistics must be updated once)";
  }
}

TEST(LevelCheckpoint, SameGradientsAndStatisticsBitForBit) {
  InstallTensorAccounting();
  ExpectSame(TrainOnce(false, "fp32"), TrainOnce(true, "fp32"));
}

TEST(LevelCheckpoint, SameUnderAutocast) {
  InstallTensorAccounting();
  ExpectSame(TrainOnce(false, "bf16"), TrainOnce(true, "bf16"));
}

TEST(LevelCheckpoint, KeepsFewerBytesAtThePeak) {
  InstallTensorAccounting();
  const Trained plain = TrainOnce(false, "fp32");
  const Trained ckpt = TrainOnce(true, "fp32");
  EXPECT_LT(ckpt.peak_bytes, plain.peak_bytes * 3 / 4)
      << "plain " << plain.peak_bytes << " B, checkpointed " << ckpt.peak_bytes << " B";
}

TEST(LevelCheckpoint, WithoutGradModeItIsThePlainForward) {
  UNet model(Model(), 7);
  model->eval();
  torch::NoGradGuard no_grad;
  const torch::Tensor x = torch::randn({1, 4, 32, 32});
  const torch::Tensor plain = model->forward(x)[0];
  model->encoder->set_checkpointing(true);
  model->decoder->set_checkpointing(true);
  EXPECT_TRUE(torch::equal(plain, model->forward(x)[0]));
}

}  // namespace
}  // namespace up
