// The counting CPU allocator against tensors of known sizes: live bytes rise
// and fall with them, the peak stays, LibTorch's kernels (oneDNN
// convolutions, autograd) run on its blocks, and zero-byte tensors pass.
#include "common/model/tensor_accounting.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace up {
namespace {

const torch::Device kCpu(torch::kCPU);

TEST(TensorAccounting, CountsTensorsOfKnownSize) {
  InstallTensorAccounting();
  ASSERT_TRUE(TensorAccountingInstalled());
  ResetPeakTensorBytes(kCpu);
  const int64_t before = TensorBytesOn(kCpu).live;
  {
    torch::Tensor a = torch::empty({1 << 20}, torch::kFloat32);  // 4 MiB
    EXPECT_EQ(TensorBytesOn(kCpu).live - before, 4 << 20);
    torch::Tensor b = torch::empty({1 << 18}, torch::kFloat64);  // 2 MiB
    EXPECT_EQ(TensorBytesOn(kCpu).live - before, 6 << 20);
    torch::Tensor view = a.view({1024, 1024});  // shares a's storage: nothing new
    EXPECT_EQ(TensorBytesOn(kCpu).live - before, 6 << 20);
    torch::Tensor none = torch::empty({0});
    EXPECT_EQ(TensorBytesOn(kCpu).live - before, 6 << 20);
  }
  EXPECT_EQ(TensorBytesOn(kCpu).live, before);
  EXPECT_GE(TensorBytesOn(kCpu).peak - before, 6 << 20);
  // A new peak starts at what is live.
  ResetPeakTensorBytes(kCpu);
  EXPECT_EQ(TensorBytesOn(kCpu).peak, TensorBytesOn(kCpu).live);
}

TEST(TensorAccounting, KernelsRunOnCountedBlocks) {
  InstallTensorAccounting();
  torch::manual_seed(0);
  torch::nn::Conv2d conv(torch::nn::Conv2dOptions(4, 8, 3).padding(1));
  torch::Tensor x = torch::randn({2, 4, 32, 32}, torch::requires_grad());
  const int64_t before = TensorBytesOn(kCpu).live;
  torch::Tensor y = conv(x);  // (2, 8, 32, 32): the output alone is 64 KiB
  EXPECT_GE(TensorBytesOn(kCpu).live - before, 2 * 8 * 32 * 32 * 4);
  y.sum().backward();
  EXPECT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().sizes(), x.sizes());
}

}  // namespace
}  // namespace up
