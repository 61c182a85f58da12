// OrderedAllReduceSum over a real Gloo process group on loopback (a real
// TCPStore, real sockets; the ranks are threads of this process): every rank
// ends with ((x_0 + x_1) + x_2) + ... bit for bit, whatever the length (padding
// included), and a rank that never comes ends the others' wait at the
// deadline with an error naming what was summed.
#include "ipc/c10d_reduce.h"

#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <future>
#include <thread>

#include "common/base/errors.h"
#include "ipc/c10d_channel.h"

namespace up::ipc {
namespace {

struct Store {
  Store() {
    c10d::TCPStoreOptions o;
    o.port = 0;
    o.isServer = true;
    o.waitWorkers = false;
    o.timeout = std::chrono::seconds(20);
    server = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", o);
  }
  C10dOptions For(int rank, int size, const std::string& prefix, double timeout_s = 20) const {
    C10dOptions c;
    c.store_host = "127.0.0.1";
    c.store_port = server->getPort();
    c.prefix = prefix;
    c.rank = rank;
    c.world_size = size;
    c.bind_host = "127.0.0.1";
    c.timeout_s = timeout_s;
    return c;
  }
  c10::intrusive_ptr<c10d::TCPStore> server;
};

// Values of mixed magnitude, so that the order of additions shows in the bits.
torch::Tensor Values(int rank, int64_t n) {
  torch::manual_seed(100 + rank);
  return torch::randn({n}) * torch::pow(10.0, torch::randint(-6, 7, {n}).to(torch::kFloat32));
}

class OrderedSum : public ::testing::TestWithParam<std::pair<int, int64_t>> {};

TEST_P(OrderedSum, EveryRankGetsTheRankOrderedSumBitForBit) {
  const auto [ranks, n] = GetParam();
  Store store;
  torch::Tensor want = Values(0, n).clone();  // (n,)
  for (int r = 1; r < ranks; ++r) want.add_(Values(r, n));
  // Made here: the generator's seed is global, not the threads' own.
  std::vector<torch::Tensor> inputs;
  for (int r = 0; r < ranks; ++r) inputs.push_back(Values(r, n));
  std::vector<std::future<torch::Tensor>> results;
  for (int r = 0; r < ranks; ++r) {
    results.push_back(std::async(std::launch::async, [&, r] {
      auto group = JoinStageGroup(store.For(r, ranks, "sum"), torch::Device(torch::kCPU));
      torch::Tensor x = inputs[static_cast<size_t>(r)];
      OrderedAllReduceSum(*group, x, 20, "test gradients");
      return x;
    }));
  }
  for (int r = 0; r < ranks; ++r) {
    const torch::Tensor got = results[static_cast<size_t>(r)].get();
    ASSERT_EQ(got.numel(), n);
    EXPECT_TRUE(torch::equal(got, want)) << "rank " << r;
  }
  // The order matters for these values: another order gives other bits.
  if (ranks == 3) {
    torch::Tensor other = Values(2, n).clone();
    other.add_(Values(1, n));
    other.add_(Values(0, n));
    EXPECT_FALSE(torch::equal(other, want));
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, OrderedSum,
                         ::testing::Values(std::make_pair(2, int64_t{1000003}),
                                           std::make_pair(3, int64_t{100003}),
                                           std::make_pair(4, int64_t{7})),
                         [](const auto& info) {
                           return "r" + std::to_string(info.param.first) + "n" +
                                  std::to_string(info.param.second);
                         });

TEST(OrderedSum, OneRankLeavesTheTensorAlone) {
  Store store;
  auto group = JoinStageGroup(store.For(0, 1, "alone"), torch::Device(torch::kCPU));
  torch::Tensor x = Values(0, 10);
  const torch::Tensor before = x.clone();
  OrderedAllReduceSum(*group, x, 5, "test gradients");
  EXPECT_TRUE(torch::equal(x, before));
}

TEST(OrderedSum, APeerThatNeverSumsEndsTheWaitAtTheDeadline) {
  Store store;
  auto second = std::async(std::launch::async, [&] {
    return JoinStageGroup(store.For(1, 2, "late", 2), torch::Device(torch::kCPU));
  });
  auto first = JoinStageGroup(store.For(0, 2, "late", 2), torch::Device(torch::kCPU));
  auto idle = second.get();  // joined, but never takes part
  torch::Tensor x = Values(0, 64);
  const auto start = std::chrono::steady_clock::now();
  try {
    OrderedAllReduceSum(*first, x, 2, "replica 0's encoder gradients");
    FAIL() << "no error";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("replica 0's encoder gradients"), std::string::npos)
        << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(15));
}

}  // namespace
}  // namespace up::ipc
