// The counting CPU allocator against tensors of known sizes: live bytes rise
// and fall with them, the peak stays, LibTorch's kernels (oneDNN
// convolutions, autograd) run on its blocks, and zero-byte tensors pass.
#include "common/device/tensor_accounting.h"

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

// Charges to a budget for the scope, stops charging after.
class BudgetScope {
 public:
  explicit BudgetScope(int64_t bytes) {
    budget_.budget = bytes;
    UseDeviceBudget(&budget_);
  }
  ~BudgetScope() { UseDeviceBudget(nullptr); }
  DeviceBudget& operator*() { return budget_; }
  DeviceBudget* operator->() { return &budget_; }

 private:
  DeviceBudget budget_;
};

TEST(DeviceBudget, RefusesPastTheBudgetAsCudaWould) {
  InstallTensorAccounting();
  BudgetScope budget(8 << 20);
  torch::Tensor a = torch::empty({1 << 20}, torch::kFloat32);  // 4 MiB: fits
  EXPECT_EQ(budget->used.load(), 4 << 20);
  const int64_t live = TensorBytesOn(kCpu).live;
  try {
    torch::Tensor b = torch::empty({1 << 21}, torch::kFloat32);  // 8 MiB more: refused
    FAIL() << "an allocation past the budget succeeded";
  } catch (const c10::OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("budget"), std::string::npos) << e.what();
  }
  // Nothing of the refused block stays charged or counted.
  EXPECT_EQ(budget->used.load(), 4 << 20);
  EXPECT_EQ(TensorBytesOn(kCpu).live, live);
  EXPECT_EQ(budget->refused.load(), 1);
  const std::optional<Refusal> r = LastRefusal();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->requested, 8 << 20);
  EXPECT_EQ(r->in_use, 4 << 20);
  EXPECT_EQ(r->budget, 8 << 20);
  a = torch::Tensor();  // freeing uncharges
  EXPECT_EQ(budget->used.load(), 0);
  EXPECT_EQ(budget->peak.load(), 4 << 20);
}

TEST(DeviceBudget, BlocksFromBeforeTheBudgetAreNeverUncharged) {
  InstallTensorAccounting();
  torch::Tensor before = torch::empty({1 << 18}, torch::kFloat32);  // 1 MiB, uncharged
  BudgetScope budget(4 << 20);
  torch::Tensor during = torch::empty({1 << 18}, torch::kFloat32);
  EXPECT_EQ(budget->used.load(), 1 << 20);
  before = torch::Tensor();
  EXPECT_EQ(budget->used.load(), 1 << 20) << "a block the budget never charged was uncharged";
  during = torch::Tensor();
  EXPECT_EQ(budget->used.load(), 0);
}

TEST(DeviceBudget, HostBuffersStayOutsideAndRingSlotsCountIn) {
  InstallTensorAccounting();
  BudgetScope budget(2 << 20);
  const int64_t live = TensorBytesOn(kCpu).live;
  // A parking buffer (pinned host memory on a GPU) is not the device's.
  torch::Tensor host = EmptyUncounted({1 << 20}, at::kFloat);  // 4 MiB, past the budget
  host.fill_(1.0f);
  EXPECT_EQ(host.sum().item<float>(), static_cast<float>(1 << 20));
  EXPECT_FALSE(CountedByAccounting(host));
  EXPECT_EQ(budget->used.load(), 0);
  // A slot read in place is, as its copy onto the device would be.
  ChargeUnowned(1 << 20);
  EXPECT_EQ(budget->used.load(), 1 << 20);
  EXPECT_EQ(TensorBytesOn(kCpu).live, live + (1 << 20));
  EXPECT_THROW(ChargeUnowned(2 << 20), c10::OutOfMemoryError);
  UnchargeUnowned(1 << 20);
  EXPECT_EQ(budget->used.load(), 0);
  EXPECT_EQ(TensorBytesOn(kCpu).live, live);
  EXPECT_TRUE(CountedByAccounting(torch::empty({4})));
}

}  // namespace
}  // namespace up
