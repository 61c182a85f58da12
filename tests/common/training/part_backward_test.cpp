// PartBackward: the backward of a pipeline part from the gradients sent back
// for its outputs gives autograd's own gradients bit for bit, brings each
// skip's gradient onto the device only when the backward reaches it, and
// lets go of the outputs' values that the graph does not need.
#include "common/training/part_backward.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace up {
namespace {

constexpr int64_t kN = 1000;

// Three "levels": s0 = x * w0, s1 = s0 + w1 (saves nothing of s0),
// out = s1 * w2 (saves s1); with `twice`, s1 also feeds out2 = s1.sin().
struct Part {
  torch::Tensor w0 = torch::randn({kN}).requires_grad_();
  torch::Tensor w1 = torch::randn({kN}).requires_grad_();
  torch::Tensor w2 = torch::randn({kN}).requires_grad_();
  torch::Tensor x = torch::randn({kN});

  // The outputs: [out, (out2,) s1, s0, s0] (s0 sent to two parts).
  std::vector<torch::Tensor> Forward(bool twice) const {
    const torch::Tensor s0 = x * w0;
    const torch::Tensor s1 = s0 + w1;
    std::vector<torch::Tensor> outs{s1 * w2};
    if (twice) outs.push_back(s1.sin());
    outs.insert(outs.end(), {s1, s0, s0});
    return outs;
  }
  std::vector<torch::Tensor> Grads() const { return {w0.grad(), w1.grad(), w2.grad()}; }
  void Zero() {
    for (torch::Tensor* w : {&w0, &w1, &w2}) w->mutable_grad() = torch::Tensor();
  }
};

void ExpectSame(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_TRUE(b[i].defined()) << "w" << i << " got no gradient";
    EXPECT_TRUE(torch::equal(a[i], b[i])) << "w" << i;
  }
}

TEST(PartBackward, GivesAutogradsGradientsBitForBit) {
  torch::manual_seed(5);
  for (bool twice : {false, true}) {
    Part part;
    const size_t outputs = twice ? 5 : 4;
    std::vector<torch::Tensor> grads;
    for (size_t i = 0; i < outputs; ++i) grads.push_back(torch::randn({kN}));
    torch::autograd::backward(part.Forward(twice), grads);
    const std::vector<torch::Tensor> want = part.Grads();
    part.Zero();
    std::vector<torch::Tensor> outs = part.Forward(twice);
    PartBackward(&outs, grads, [](const torch::Tensor& g) { return g.clone(); });
    EXPECT_TRUE(outs.empty());
    ExpectSame(want, part.Grads());
  }
}

// The root's gradient comes first; each skip's when the backward reaches
// it (the levels above it done), after its value has gone.
TEST(PartBackward, BringsEachSkipsGradientInWhenItIsReached) {
  torch::manual_seed(6);
  Part part;
  std::vector<torch::Tensor> grads;
  for (int i = 0; i < 4; ++i) grads.push_back(torch::randn({kN}));
  std::vector<torch::Tensor> outs = part.Forward(false);
  const c10::weak_intrusive_ptr<c10::StorageImpl> s0_value(outs[2].storage().getWeakStorageImpl());
  std::vector<std::string> order;
  auto to_device = [&](const torch::Tensor& g) {
    for (size_t i = 0; i < grads.size(); ++i) {
      if (g.data_ptr() != grads[i].data_ptr()) continue;
      std::string what = "g" + std::to_string(i);
      if (part.w2.grad().defined()) what += " after w2";
      if (part.w1.grad().defined()) what += " after w1";
      order.push_back(what);
    }
    return g.clone();
  };
  PartBackward(&outs, grads, to_device);
  EXPECT_TRUE(s0_value.expired()) << "s0's value outlived the backward";
  EXPECT_EQ(order, (std::vector<std::string>{"g0", "g1 after w2", "g2 after w2 after w1",
                                             "g3 after w2 after w1"}));
}

TEST(PartBackward, RefusesAMismatchedGradient) {
  Part part;
  std::vector<torch::Tensor> outs = part.Forward(false);
  std::vector<torch::Tensor> grads{torch::randn({kN}), torch::randn({kN}), torch::randn({kN}),
                                   torch::randn({kN + 1})};
  EXPECT_THROW(PartBackward(&outs, grads, [](const torch::Tensor& g) { return g; }), c10::Error);
}

}  // namespace
}  // namespace up
