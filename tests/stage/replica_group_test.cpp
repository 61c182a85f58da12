// The replicas' gradient exchange against the single-process trainer's sum:
// two (and three) copies of a small network, each in its own thread with
// its own real Gloo group member, each accumulate their micro-batches'
// gradients and exchange them (ReplicaGroup); one copy accumulates all the
// micro-batches with ReplicaGradientSum. Every copy ends with exactly the
// single copy's gradients, and copies that step alike stay equal.
#include "stage/replica_group.h"

#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <future>

#include "common/training/replica_gradients.h"

namespace up::stage {
namespace {

torch::nn::Sequential Net() {
  torch::manual_seed(7);
  return torch::nn::Sequential(torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 8, 3).padding(1)),
                               torch::nn::ReLU(),
                               torch::nn::Conv2d(torch::nn::Conv2dOptions(8, 2, 3).padding(1)));
}

// Micro-batch g of the batch (replica r's m-th is g = r * M + m).
torch::Tensor Input(int g) {
  torch::manual_seed(1000 + g);
  return torch::randn({2, 3, 9, 9}) * (1 + g);
}

void Backward(torch::nn::Sequential& net, int g, int total) {
  (net->forward(Input(g)).pow(2).mean() / total).backward();
}

std::vector<torch::Tensor> Grads(torch::nn::Sequential& net) {
  std::vector<torch::Tensor> out;
  for (const torch::Tensor& p : net->parameters()) out.push_back(p.grad().clone());
  return out;
}

class Replicas : public ::testing::TestWithParam<int> {};

TEST_P(Replicas, ExchangeEqualsTheSingleProcessSumBitForBit) {
  const int R = GetParam(), M = 3;
  // One process, the replicas' tree.
  torch::nn::Sequential single = Net();
  ReplicaGradientSum sum(single->parameters());
  for (int g = 0; g < R * M; ++g) {
    Backward(single, g, R * M);
    if ((g + 1) % M == 0) sum.EndReplica();
  }
  sum.Finish();
  const std::vector<torch::Tensor> want = Grads(single);

  c10d::TCPStoreOptions o;
  o.port = 0;
  o.isServer = true;
  o.waitWorkers = false;
  auto server = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", o);
  // Built here: the generator's seed is global, not the threads' own.
  std::vector<torch::nn::Sequential> nets;
  std::vector<torch::Tensor> inputs;
  for (int r = 0; r < R; ++r) nets.push_back(Net());
  for (int g = 0; g < R * M; ++g) inputs.push_back(Input(g));
  std::vector<std::future<std::vector<torch::Tensor>>> copies;
  for (int r = 0; r < R; ++r) {
    copies.push_back(std::async(std::launch::async, [&, r] {
      torch::nn::Sequential net = nets[static_cast<size_t>(r)];
      ReplicaGroup group({"127.0.0.1:" + std::to_string(server->getPort()), "feed", "encoder",
                          "127.0.0.1", r, R, 20},
                         torch::Device(torch::kCPU));
      for (int m = 0; m < M; ++m)
        (net->forward(inputs[static_cast<size_t>(r * M + m)]).pow(2).mean() / (R * M)).backward();
      group.SumGradients(*net);
      return Grads(net);
    }));
  }
  for (int r = 0; r < R; ++r) {
    const std::vector<torch::Tensor> got = copies[static_cast<size_t>(r)].get();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(torch::equal(got[i], want[i])) << "replica " << r << ", parameter " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Counts, Replicas, ::testing::Values(2, 3));

TEST(ReplicaGradientSum, OneReplicaIsAutogradsOwnSum) {
  torch::nn::Sequential a = Net(), b = Net();
  ReplicaGradientSum sum(b->parameters());
  for (int g = 0; g < 4; ++g) {
    Backward(a, g, 4);
    Backward(b, g, 4);
  }
  sum.EndReplica();
  sum.Finish();
  const auto ga = Grads(a), gb = Grads(b);
  for (size_t i = 0; i < ga.size(); ++i) EXPECT_TRUE(torch::equal(ga[i], gb[i]));
}

}  // namespace
}  // namespace up::stage
