// NormActBackward's two implementations: the fused CPU loop (what a CPU runs)
// and the tensor ops (what a GPU runs) give the same gradients to rounding,
// for every statistics grouping, activation and affine or not, on
// contiguous and non-contiguous gradients.
#include "common/model/norm_act_backward.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>

namespace up {
namespace {

struct GroupCase {
  const char* name;
  StatGroups groups;
  int64_t num_groups;
};

TEST(NormActBackward, FusedLoopEqualsTheTensorOps) {
  const std::vector<GroupCase> groupings{{"per channel", StatGroups::kChannel, 1},
                                         {"per sample and channel", StatGroups::kSampleChannel, 1},
                                         {"per sample and group", StatGroups::kSampleGroup, 3}};
  for (const GroupCase& grouping : groupings) {
    for (const bool affine : {true, false}) {
      for (const double slope : {-1.0, 0.0, 0.01}) {  // -1: no activation
        for (const bool transposed_grad : {false, true}) {
          SCOPED_TRACE(std::string(grouping.name) + (affine ? ", affine" : "") + ", slope " +
                       std::to_string(slope) + (transposed_grad ? ", strided grad" : ""));
          torch::manual_seed(7);
          const torch::Tensor x = torch::randn({3, 6, 5, 7, 4}) * 2 + 0.5;  // (N, C, *S)
          torch::Tensor grad_y = torch::randn({3, 6, 5, 7, 4});
          if (transposed_grad)
            grad_y = torch::randn({3, 6, 4, 7, 5}).transpose(2, 4);  // the same shape, strided
          const torch::Tensor w = affine ? torch::randn({6}) : torch::Tensor();
          const torch::Tensor b = affine ? torch::randn({6}) : torch::Tensor();
          NormActSpec spec;
          spec.groups = grouping.groups;
          spec.num_groups = grouping.num_groups;
          spec.act = slope >= 0;
          spec.slope = slope >= 0 ? slope : 0.0;
          const NormActGrads fused = NormActBackward(x, grad_y, w, b, spec);
          const NormActGrads ops = NormActBackwardByOps(x, grad_y, w, b, spec);
          ASSERT_EQ(fused.x.sizes(), x.sizes());
          EXPECT_TRUE(torch::allclose(fused.x, ops.x, 1e-4, 1e-5))
              << (fused.x - ops.x).abs().max().item<double>();
          ASSERT_EQ(fused.weight.defined(), affine);
          if (affine) {
            EXPECT_TRUE(torch::allclose(fused.weight, ops.weight, 1e-4, 1e-4))
                << (fused.weight - ops.weight).abs().max().item<double>();
            EXPECT_TRUE(torch::allclose(fused.bias, ops.bias, 1e-4, 1e-4))
                << (fused.bias - ops.bias).abs().max().item<double>();
          }
        }
      }
    }
  }
}

// The formula itself, against autograd through the composite ops (the
// statistics, the normalisation, the affine and the activation written out).
TEST(NormActBackward, EqualsAutogradThroughTheFormula) {
  torch::manual_seed(3);
  const torch::Tensor x0 = torch::randn({2, 4, 6, 5, 3}, torch::kDouble).to(torch::kFloat);
  const torch::Tensor w = torch::randn({4}), b = torch::randn({4});
  const torch::Tensor grad_y = torch::randn({2, 4, 6, 5, 3});
  torch::Tensor x = x0.clone().requires_grad_();
  torch::Tensor wv = w.clone().requires_grad_(), bv = b.clone().requires_grad_();
  // GroupNorm of 2 groups, then LeakyReLU 0.1, by hand.
  const torch::Tensor grouped = x.view({2, 2, -1});
  const torch::Tensor mean = grouped.mean(2, true);
  const torch::Tensor var = grouped.var(2, /*unbiased=*/false, /*keepdim=*/true);
  const torch::Tensor xhat = ((grouped - mean) / (var + 1e-5).sqrt()).view_as(x);
  const torch::Tensor y =
      torch::leaky_relu(xhat * wv.view({1, 4, 1, 1, 1}) + bv.view({1, 4, 1, 1, 1}), 0.1);
  y.backward(grad_y);
  NormActSpec spec;
  spec.groups = StatGroups::kSampleGroup;
  spec.num_groups = 2;
  spec.act = true;
  spec.slope = 0.1;
  const NormActGrads g = NormActBackward(x0, grad_y, w, b, spec);
  EXPECT_TRUE(torch::allclose(g.x, x.grad(), 1e-4, 1e-5));
  EXPECT_TRUE(torch::allclose(g.weight, wv.grad(), 1e-4, 1e-4));
  EXPECT_TRUE(torch::allclose(g.bias, bv.grad(), 1e-4, 1e-4));
}

}  // namespace
}  // namespace up
