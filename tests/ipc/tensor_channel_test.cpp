// Tensors over the shared-memory ring: values arrive bit-exact, the receiver's
// tensors view the slot (zero copy) until released, and any source layout works.
#include "ipc/tensor_channel.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "common/base/errors.h"

namespace up::ipc {
namespace {

using Clock = std::chrono::steady_clock;

class TensorChannel : public ::testing::Test {
 protected:
  void SetUp() override {
    name_ = "up-test-tc-" + std::to_string(getpid()) + "-" + RunId::Random().Hex().substr(0, 8);
    ring_ = ShmRing::Create({name_, RunId::Random(), 2, 1 << 20});
  }
  Deadline Soon() { return Clock::now() + std::chrono::seconds(5); }

  std::string name_;
  std::unique_ptr<ShmRing> ring_;
};

TEST_F(TensorChannel, RoundTripIsBitExactAndZeroCopy) {
  ShmTensorSender sender(*ring_);
  ShmTensorReceiver receiver(*ring_);
  torch::Tensor a = torch::randn({2, 8, 4, 4});
  torch::Tensor b = torch::randn({2, 3, 5}).to(torch::kBFloat16);
  torch::Tensor strided = torch::randn({6, 4}).t();  // non-contiguous source
  sender.Send({3, 1, Direction::kForward}, {{"bottleneck", a}, {"skip0", b}, {"t", strided}},
              Soon());

  TensorMessage m = receiver.Receive(Soon());
  EXPECT_EQ(m.meta.step, 3u);
  EXPECT_EQ(m.meta.micro_batch, 1u);
  ASSERT_EQ(m.tensors.size(), 3u);
  EXPECT_EQ(m.tensors[0].name, "bottleneck");
  EXPECT_TRUE(torch::equal(m.tensors[0].tensor, a));
  EXPECT_TRUE(torch::equal(m.tensors[1].tensor, b));
  EXPECT_TRUE(torch::equal(m.tensors[2].tensor, strided));
  const auto* base = static_cast<const char*>(ring_->base());
  const auto* data = static_cast<const char*>(m.tensors[0].tensor.data_ptr());
  EXPECT_TRUE(data >= base && data < base + ring_->mapped_bytes())
      << "the received tensor should view the ring";
  EXPECT_EQ(reinterpret_cast<uintptr_t>(data) % 64, 0u);
  receiver.Release(m);
  EXPECT_EQ(ring_->tail(), 1u);
}

TEST_F(TensorChannel, SlotStaysHeldUntilReleased) {
  ShmTensorSender sender(*ring_);
  ShmTensorReceiver receiver(*ring_);
  for (int i = 0; i < 2; ++i)
    sender.Send({0, static_cast<uint32_t>(i), Direction::kForward}, {{"x", torch::ones({4})}},
                Soon());
  TensorMessage first = receiver.Receive(Soon());
  EXPECT_THROW(sender.Send({0, 2, Direction::kForward}, {{"x", torch::ones({4})}},
                           Clock::now() + std::chrono::milliseconds(50)),
               TimeoutError);
  receiver.Release(first);
  sender.Send({0, 2, Direction::kForward}, {{"x", torch::ones({4})}}, Soon());
  EXPECT_THROW(receiver.Release(first), UsageError) << "double release";
}

TEST_F(TensorChannel, UnsupportedDtypeIsRejected) {
  ShmTensorSender sender(*ring_);
  EXPECT_THROW(sender.Send({0, 0, Direction::kForward},
                           {{"c", torch::zeros({2}, torch::kComplexFloat)}}, Soon()),
               UsageError);
}

}  // namespace
}  // namespace up::ipc
