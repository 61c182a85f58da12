// The c10d transport between two ranks of a real Gloo process group over
// loopback (a real TCPStore, real sockets; the two ranks are two threads of
// this test process): tensors arrive bit-exact with their names, dtypes and
// order; two endpoints that send to each other at once do not deadlock; a
// forged header is refused before anything is allocated; a receive with no
// sender ends at its deadline.
#include "ipc/c10d_channel.h"

#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <future>
#include <thread>

#include "common/base/errors.h"
#include "ipc/wire.h"

namespace up::ipc {
namespace {

using Clock = std::chrono::steady_clock;

// A store served by this process on a free loopback port.
struct LocalStore {
  LocalStore() {
    c10d::TCPStoreOptions o;
    o.port = 0;
    o.isServer = true;
    o.waitWorkers = false;
    o.timeout = std::chrono::seconds(20);
    server = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", o);
  }
  C10dOptions For(int rank, const std::string& prefix) const {
    C10dOptions c;
    c.store_host = "127.0.0.1";
    c.store_port = server->getPort();
    c.prefix = prefix;
    c.rank = rank;
    c.bind_host = "127.0.0.1";
    c.timeout_s = 20;
    return c;
  }
  c10::intrusive_ptr<c10d::TCPStore> server;
};

// Both ranks join at once (each blocks until the other arrives).
std::pair<c10::intrusive_ptr<c10d::Backend>, c10::intrusive_ptr<c10d::Backend>> Pair(
    const LocalStore& store, const std::string& prefix) {
  auto second = std::async(std::launch::async, [&] {
    return JoinStageGroup(store.For(1, prefix), torch::Device(torch::kCPU));
  });
  auto first = JoinStageGroup(store.For(0, prefix), torch::Device(torch::kCPU));
  return {first, second.get()};
}

Deadline In(double s) {
  return Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
}

TEST(C10dChannel, TensorsArriveExactWithNamesDtypesAndMeta) {
  LocalStore store;
  auto [g0, g1] = Pair(store, "exact");
  C10dTensorSender sender(g0, 1, 1, torch::kCPU, 4, 20);
  C10dTensorReceiver receiver(g1, 0, 1, torch::kCPU, 1 << 20);
  torch::manual_seed(3);
  const torch::Tensor a = torch::randn({2, 3, 8, 8});                       // [N, C, H, W] f32
  const torch::Tensor b = torch::randn({2, 5, 4, 4}).to(torch::kBFloat16);  // bf16
  const torch::Tensor c = torch::randn({6, 4}).t();                         // not contiguous
  for (uint32_t mb = 0; mb < 3; ++mb) {
    sender.Send({7, mb, Direction::kForward}, {{"bottleneck", a + mb}, {"skip0", b}, {"skip1", c}},
                In(20));
  }
  for (uint32_t mb = 0; mb < 3; ++mb) {
    TensorMessage m = receiver.Receive(In(20));
    EXPECT_EQ(m.meta.step, 7u);
    EXPECT_EQ(m.meta.micro_batch, mb);
    EXPECT_EQ(m.meta.direction, Direction::kForward);
    ASSERT_EQ(m.tensors.size(), 3u);
    EXPECT_EQ(m.tensors[0].name, "bottleneck");
    EXPECT_EQ(m.tensors[1].name, "skip0");
    EXPECT_EQ(m.tensors[1].tensor.scalar_type(), torch::kBFloat16);
    EXPECT_TRUE(torch::equal(m.tensors[0].tensor, a + mb));
    EXPECT_TRUE(torch::equal(m.tensors[1].tensor, b));
    EXPECT_TRUE(torch::equal(m.tensors[2].tensor, c));
    receiver.Release(m);
  }
}

TEST(C10dChannel, BothSidesSendingAtOnceDoNotDeadlock) {
  LocalStore store;
  auto [g0, g1] = Pair(store, "both");
  // Each side sends 4 messages before it receives any (like 1F1B's F and B
  // of neighbouring micro-batches); the in-flight window holds them.
  auto side = [](c10::intrusive_ptr<c10d::Backend> g, int rank) {
    C10dTensorSender s(g, 1 - rank, rank == 0 ? 1 : 2, torch::kCPU, 4, 20);
    C10dTensorReceiver r(g, 1 - rank, rank == 0 ? 2 : 1, torch::kCPU, 1 << 22);
    for (uint32_t i = 0; i < 4; ++i)
      s.Send({1, i, Direction::kForward}, {{"x", torch::full({256, 256}, rank * 10 + i)}}, In(20));
    float sum = 0;
    for (uint32_t i = 0; i < 4; ++i) sum += r.Receive(In(20)).tensors[0].tensor[0][0].item<float>();
    return sum;
  };
  auto other = std::async(std::launch::async, side, g1, 1);
  EXPECT_FLOAT_EQ(side(g0, 0), 10 + 11 + 12 + 13);
  EXPECT_FLOAT_EQ(other.get(), 0 + 1 + 2 + 3);
}

TEST(C10dChannel, ForgedHeaderIsRefusedBeforeAllocating) {
  LocalStore store;
  auto [g0, g1] = Pair(store, "forged");
  C10dTensorReceiver receiver(g1, 0, 1, torch::kCPU, 1 << 20);
  // A header announcing one float tensor of 2^40 elements.
  WireWriter w;
  w.U64(1).U32(0).U32(static_cast<uint32_t>(Direction::kForward)).U32(1);
  w.Str("huge").U32(static_cast<uint32_t>(DType::kFloat32)).I64Vec({1 << 20, 1 << 20});
  const std::string encoded = w.Take();
  torch::Tensor header = torch::zeros({4096}, torch::kUInt8);
  const uint64_t length = encoded.size();
  std::memcpy(header.data_ptr(), &length, 8);
  std::memcpy(header.data_ptr<uint8_t>() + 8, encoded.data(), encoded.size());
  std::vector<at::Tensor> one{header};
  auto sent = g0->send(one, 1, 1);  // completes once the receiver posts its receive
  try {
    receiver.Receive(In(20));
    FAIL() << "a forged header was accepted";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("more than the 1048576 bytes"), std::string::npos)
        << e.what();
  }
  sent->wait();
}

TEST(C10dChannel, ReceiveWithoutSenderEndsAtTheDeadline) {
  LocalStore store;
  auto [g0, g1] = Pair(store, "deadline");
  C10dTensorReceiver receiver(g1, 0, 1, torch::kCPU, 1 << 20);
  const auto start = Clock::now();
  EXPECT_THROW(receiver.Receive(In(0.5)), TimeoutError);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
}

}  // namespace
}  // namespace up::ipc
