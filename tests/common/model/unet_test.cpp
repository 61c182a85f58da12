// The U-Net halves: composing UNetEncoder and UNetDecoder must be the same
// function, bit for bit, as UNet, and each half built alone must get the same
// weights as inside UNet (the pipeline builds only one half per process).
#include "common/model/unet.h"

#include <gtest/gtest.h>

#include "common/model/digest.h"

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
  for (const char* norm : {"batch", "group", "instance"}) {
    ModelConfig m = Tiny(2);
    m.norm = norm;
    m.groups = 2;
    UNet unet(m, 0);
    EXPECT_EQ(unet->forward(torch::randn(InputShape(2, 2, 8)))[0].sizes(),
              (std::vector<int64_t>{2, 3, 8, 8}))
        << norm;
  }
}

}  // namespace
}  // namespace up
