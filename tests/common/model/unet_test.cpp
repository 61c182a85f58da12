// The U-Net halves: composing UNetEncoder and UNetDecoder must be the same
// function, bit for bit, as UNet, and each half built alone must get the same
// weights as inside UNet (the pipeline builds only one half per process).
#include "common/model/unet.h"

#include <gtest/gtest.h>

#include "common/model/digest.h"
#include "common/model/precision.h"

#include <map>
#include <set>

namespace up {
namespace {

ModelConfig Tiny(int dims) {
  ModelConfig m;
  m.dims = dims;
  m.in_channels = 4;
  m.num_classes = 3;
  m.features = {4, 8, 16};
  return m;
}

std::vector<int64_t> InputShape(int dims, int64_t n, int64_t size) {
  std::vector<int64_t> s{n, 4};
  for (int d = 0; d < dims; ++d) s.push_back(size);
  return s;
}

void ExpectBitEqual(const torch::Tensor& a, const torch::Tensor& b) {
  ASSERT_EQ(a.sizes(), b.sizes());
  EXPECT_TRUE(torch::equal(a, b)) << "max abs diff " << (a - b).abs().max().item<double>();
}

class UNetDims : public ::testing::TestWithParam<int> {};

TEST_P(UNetDims, EncoderThenDecoderEqualsUNetBitwise) {
  const int dims = GetParam();
  UNet unet(Tiny(dims), 7);
  UNetEncoder enc(Tiny(dims), EncoderInitSeed(7));
  UNetDecoder dec(Tiny(dims), DecoderInitSeed(7));
  torch::Tensor x = torch::randn(InputShape(dims, 2, 16));
  torch::Tensor whole = unet->forward(x)[0];
  torch::Tensor split = dec->forward(enc->forward(x))[0];
  EXPECT_EQ(whole.size(1), 3);
  ExpectBitEqual(whole, split);
}

TEST_P(UNetDims, HalvesBuiltAloneHaveUNetWeights) {
  const int dims = GetParam();
  UNet unet(Tiny(dims), 11);
  UNetEncoder enc(Tiny(dims), EncoderInitSeed(11));
  UNetDecoder dec(Tiny(dims), DecoderInitSeed(11));
  EXPECT_EQ(ParamDigest(NamedState(*unet->encoder), NamedState(*unet->decoder)),
            ParamDigest(NamedState(*enc), NamedState(*dec)));
  UNet other(Tiny(dims), 12);
  EXPECT_NE(ParamDigest(NamedState(*unet->encoder), NamedState(*unet->decoder)),
            ParamDigest(NamedState(*other->encoder), NamedState(*other->decoder)));
}

TEST_P(UNetDims, BoundaryShapesMatchTheEncoder) {
  const int dims = GetParam();
  UNetEncoder enc(Tiny(dims), 1);
  Boundary b = enc->forward(torch::randn(InputShape(dims, 3, 16)));
  BoundarySpec spec = BoundaryShapes(Tiny(dims), std::vector<int>(dims, 16), 3);
  ASSERT_EQ(spec.names.size(), 1 + b.skips.size());
  EXPECT_EQ(spec.names[0], "bottleneck");
  EXPECT_EQ(b.bottleneck.sizes().vec(), spec.shapes[0]);
  for (size_t i = 0; i < b.skips.size(); ++i) {
    EXPECT_EQ(spec.names[i + 1], "skip" + std::to_string(i));
    EXPECT_EQ(b.skips[i].sizes().vec(), spec.shapes[i + 1]);
  }
}

INSTANTIATE_TEST_SUITE_P(TwoAndThreeD, UNetDims, ::testing::Values(2, 3));

TEST(UNet, ParameterNamesArePrefixedByHalf) {
  UNet unet(Tiny(2), 0);
  bool saw_encoder = false, saw_decoder = false;
  for (const auto& p : unet->named_parameters()) {
    const std::string& name = p.key();
    ASSERT_TRUE(name.rfind("encoder.", 0) == 0 || name.rfind("decoder.", 0) == 0) << name;
    saw_encoder |= name == "encoder.down0.conv1.weight";
    saw_decoder |= name == "decoder.head.weight";
  }
  EXPECT_TRUE(saw_encoder);
  EXPECT_TRUE(saw_decoder);
}

TEST(UNet, NormChoicesBuild) {
  for (Norm norm : {Norm::kBatch, Norm::kGroup, Norm::kInstance}) {
    ModelConfig m = Tiny(2);
    m.norm = norm;
    m.groups = 2;
    UNet unet(m, 0);
    EXPECT_EQ(unet->forward(torch::randn(InputShape(2, 2, 8)))[0].sizes(),
              (std::vector<int64_t>{2, 3, 8, 8}))
        << norm;
  }
}

// Under bf16 autocast on the CPU, LibTorch runs max_pool3d in fp32, CUDA's
// autocast in its input's dtype. The encoder pools as on CUDA, so the CPU's
// emulated device holds no fp32 copy of a pooled level's input that a card
// would not: no cast sits between a pool and the level that fed it.
TEST_P(UNetDims, PoolsInTheInputsDtypeUnderAutocastAsOnCuda) {
  const int dims = GetParam();
  UNetEncoder enc(Tiny(dims), EncoderInitSeed(3));
  TrainConfig train;
  train.precision = Precision::kBf16;
  torch::Tensor x = torch::randn(InputShape(dims, 1, 16));  // (1, 4, 16, ...)
  Boundary b;
  {
    AutocastScope autocast(train, torch::kCPU);
    b = enc->forward(x);
  }
  EXPECT_EQ(b.bottleneck.scalar_type(), torch::kBFloat16);
  int pools = 0;
  std::vector<torch::autograd::Node*> todo{b.bottleneck.grad_fn().get()};
  std::set<torch::autograd::Node*> seen;
  while (!todo.empty()) {
    torch::autograd::Node* node = todo.back();
    todo.pop_back();
    if (!node || !seen.insert(node).second) continue;
    const bool pool = node->name().find("MaxPool") != std::string::npos;
    pools += pool;
    for (const torch::autograd::Edge& e : node->next_edges()) {
      if (pool && e.function) {
        EXPECT_EQ(e.function->name().find("ToCopy"), std::string::npos)
            << node->name() << " takes a cast: " << e.function->name();
      }
      todo.push_back(e.function.get());
    }
  }
  EXPECT_EQ(pools, 3) << "one pool in front of each level after the first, and the bottleneck";
}

}  // namespace
}  // namespace up

namespace up {
namespace {

std::set<std::string> NamesOf(const torch::nn::Module& m) {
  std::set<std::string> out;
  for (const auto& [name, t] : NamedState(m)) out.insert(name);
  return out;
}

// A pipeline part is the whole half pruned to its levels: its tensors are
// the whole half's for those levels (same names, same values), the parts
// together hold each exactly once, the released levels hold nothing, and the
// parts run one after another compute what the whole half does.
TEST(UNetParts, PartsHoldTheirLevelsAndComposeToTheWholeHalf) {
  Config config;
  config.model = Tiny(2);  // levels 0, 1, 2 and the bottleneck 3
  config.data.size = {16, 16};
  UNetEncoder whole = MakeEncoder(config);
  UNetEncoder first = MakeEncoderPart(config, 0, 1);
  UNetEncoder second = MakeEncoderPart(config, 2, 3);
  EXPECT_EQ(NamesOf(*first), (std::set<std::string>{"down0.conv1.weight",
                                                    "down0.conv2.weight",
                                                    "down0.norm1.bias",
                                                    "down0.norm1.num_batches_tracked",
                                                    "down0.norm1.running_mean",
                                                    "down0.norm1.running_var",
                                                    "down0.norm1.weight",
                                                    "down0.norm2.bias",
                                                    "down0.norm2.num_batches_tracked",
                                                    "down0.norm2.running_mean",
                                                    "down0.norm2.running_var",
                                                    "down0.norm2.weight",
                                                    "down1.conv1.weight",
                                                    "down1.conv2.weight",
                                                    "down1.norm1.bias",
                                                    "down1.norm1.num_batches_tracked",
                                                    "down1.norm1.running_mean",
                                                    "down1.norm1.running_var",
                                                    "down1.norm1.weight",
                                                    "down1.norm2.bias",
                                                    "down1.norm2.num_batches_tracked",
                                                    "down1.norm2.running_mean",
                                                    "down1.norm2.running_var",
                                                    "down1.norm2.weight"}));
  std::set<std::string> together = NamesOf(*first);
  for (const std::string& n : NamesOf(*second)) EXPECT_TRUE(together.insert(n).second) << n;
  EXPECT_EQ(together, NamesOf(*whole));
  std::map<std::string, torch::Tensor> all;
  for (const auto& [n, t] : NamedState(*whole)) all[n] = t;
  for (const auto* part : {&first, &second})
    for (const auto& [n, t] : NamedState(**part)) ExpectBitEqual(t, all.at(n));
  // Positions in the whole half's parameters(), and its count.
  const std::vector<torch::Tensor> params = whole->parameters();
  EXPECT_EQ(first->whole_parameters(), static_cast<int>(params.size()));
  const std::vector<torch::Tensor> mine = second->parameters();
  ASSERT_EQ(second->parameter_positions().size(), mine.size());
  for (size_t i = 0; i < mine.size(); ++i)
    ExpectBitEqual(mine[i], params[static_cast<size_t>(second->parameter_positions()[i])]);
  // The parts run in turn: the same skips and bottleneck.
  torch::manual_seed(3);
  const torch::Tensor x = torch::randn(InputShape(2, 2, 16));
  torch::NoGradGuard no_grad;
  whole->eval();
  first->eval();
  second->eval();
  const Boundary b = whole->forward(x);
  const PartTensors a = first->ForwardPart(x);
  const PartTensors c = second->ForwardPart(a.at("skip1"));
  ExpectBitEqual(a.at("skip0"), b.skips[0]);
  ExpectBitEqual(a.at("skip1"), b.skips[1]);
  ExpectBitEqual(c.at("skip2"), b.skips[2]);
  ExpectBitEqual(c.at("bottleneck"), b.bottleneck);
}

TEST(UNetParts, DecoderPartsRunDeepestFirstAndPutOutTheirHeads) {
  Config config;
  config.model = Tiny(2);
  config.data.size = {16, 16};
  UNetEncoder enc = MakeEncoder(config);
  UNetDecoder whole = MakeDecoder(config);
  UNetDecoder deep = MakeDecoderPart(config, 1, 2);
  UNetDecoder top = MakeDecoderPart(config, 0, 0);
  EXPECT_TRUE(NamesOf(*top).count("head.weight"));
  EXPECT_FALSE(NamesOf(*deep).count("head.weight"));
  EXPECT_TRUE(NamesOf(*deep).count("up2.weight"));
  torch::NoGradGuard no_grad;
  enc->eval();
  whole->eval();
  deep->eval();
  top->eval();
  const Boundary b = enc->forward(torch::randn(InputShape(2, 2, 16)));
  const torch::Tensor logits = whole->forward(b)[0];
  PartTensors in{{"bottleneck", b.bottleneck}, {"skip1", b.skips[1]}, {"skip2", b.skips[2]}};
  const PartTensors mid = deep->ForwardPart(in);
  EXPECT_EQ(mid.count("up2") + mid.count("up1"), 2u);
  EXPECT_EQ(mid.count("logits1"), 0u);  // no head there without deep supervision
  const PartTensors out = top->ForwardPart({{"up1", mid.at("up1")}, {"skip0", b.skips[0]}});
  ExpectBitEqual(out.at("logits0"), logits);
  EXPECT_THROW(top->ForwardPart({{"skip0", b.skips[0]}}), std::invalid_argument);
  EXPECT_THROW(MakeDecoderPart(config, 2, 3), std::invalid_argument);
}

}  // namespace
}  // namespace up
