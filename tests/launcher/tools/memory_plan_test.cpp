// The memory plan's arithmetic: parameter counts equal the real modules',
// activation counts match a hand count on a tiny model, and the user's case
// (configs/brats16g.yaml) does not fit 16 GiB in one process but does as a
// pipeline.
#include "launcher/tools/memory_plan.h"

#include <gtest/gtest.h>

#include "common/config.h"
#include "common/errors.h"
#include "common/model/unet.h"

namespace up {
namespace {

int64_t Numel(torch::nn::Module& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

TEST(MemoryPlan, ParameterCountsEqualTheModules) {
  for (int dims : {2, 3}) {
    for (const char* norm : {"batch", "instance"}) {
      Config c;
      c.model.dims = dims;
      c.model.norm = norm;
      c.model.features = {4, 8, 16};
      c.data.size = std::vector<int>(dims, 16);
      UNetEncoder enc(c.model, 0);
      UNetDecoder dec(c.model, 0);
      EXPECT_EQ(EncoderCounts(c).parameters, Numel(*enc)) << dims << norm;
      EXPECT_EQ(DecoderCounts(c).parameters, Numel(*dec)) << dims << norm;
    }
  }
}

TEST(MemoryPlan, ActivationsByHandOnATinyModel) {
  Config c;
  c.model.dims = 2;
  c.model.in_channels = 1;
  c.model.num_classes = 2;
  c.model.features = {2};
  c.data.size = {4, 4};
  // Encoder: level 0 (in 1 -> 2 over 16 voxels): 1*16 + 4*2*16 = 144; pool
  // indices 2 * 2 * 4 = 16; bottleneck (2 -> 4 over 4 voxels): 2*4 + 4*4*4 = 72.
  EXPECT_EQ(EncoderCounts(c).activation_elements, 144 + 16 + 72);
  // Decoder: level 0 (concat 4 -> 2 over 16): 4*16 + 4*2*16 = 192; head 2*2*16 = 64.
  EXPECT_EQ(DecoderCounts(c).activation_elements, 192 + 64);
}

TEST(MemoryPlan, Brats16gNeedsThePipelineOnA16GiBCard) {
  const Config c = LoadConfig(std::string(UP_SOURCE_DIR) + "/configs/brats16g.yaml", {});
  const auto rows = PlanMemory(c, ParseBytes("16GiB"));
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].name, "single-process");
  EXPECT_FALSE(rows[0].fits) << FormatBytes(rows[0].peak_bytes);
  EXPECT_EQ(rows[1].name, "single-process checkpointing");
  EXPECT_LT(rows[1].peak_bytes, rows[0].peak_bytes);
  EXPECT_EQ(rows[3].name, "pipeline recompute");
  EXPECT_TRUE(rows[3].fits) << FormatBytes(rows[3].peak_bytes);
  EXPECT_LT(rows[3].peak_bytes, rows[0].peak_bytes);
  EXPECT_GE(rows[2].peak_bytes, rows[3].peak_bytes) << "keep holds more than recompute";
}

// nnU-Net plans are planned by formula (the network's own level counts):
// its parameter counts are the built modules', and the rows are ordered as
// for the classic U-Net.
TEST(MemoryPlan, NnunetPlansByFormula) {
  for (const char* configuration : {"2d", "3d_fullres"}) {
    const Config c = LoadConfigFromString(
        "{}", "test",
        {"model.kind=nnunet",
         std::string("model.plans=") + UP_SOURCE_DIR + "/tests/data/nnunet/tiny_plans.json",
         std::string("model.configuration=") + configuration, "model.in_channels=2",
         "model.num_classes=3"});
    UNetEncoder enc = MakeEncoder(c);
    UNetDecoder dec = MakeDecoder(c);
    EXPECT_EQ(EncoderCounts(c).parameters, Numel(*enc)) << configuration;
    EXPECT_EQ(DecoderCounts(c).parameters, Numel(*dec)) << configuration;
    const auto rows = PlanMemory(c, ParseBytes("16GiB"));
    ASSERT_EQ(rows.size(), 4u);
    for (const PlanRow& r : rows) EXPECT_GT(r.activation_bytes, 0) << configuration << r.name;
    EXPECT_LT(rows[1].peak_bytes, rows[0].peak_bytes) << configuration;
    EXPECT_LE(rows[3].peak_bytes, rows[2].peak_bytes) << configuration;
  }
}

TEST(MemoryPlan, ParseBytes) {
  EXPECT_EQ(ParseBytes("16GiB"), 16LL << 30);
  EXPECT_EQ(ParseBytes("16 GiB"), 16LL << 30);
  EXPECT_EQ(ParseBytes("1.5GB"), 1500000000LL);
  EXPECT_EQ(ParseBytes("512MiB"), 512LL << 20);
  EXPECT_THROW(ParseBytes("lots"), UsageError);
  EXPECT_THROW(ParseBytes("16 furlongs"), UsageError);
}

}  // namespace
}  // namespace up

namespace up {
namespace {

// Two stages are the rows' pipeline case; more parts shrink the largest
// stage, and the fewest that fit a budget are found.
TEST(MemoryPlanParts, TwoStagesAreThePipelineRowsAndMorePartsShrinkEachStage) {
  for (const char* policy : {"keep", "recompute"}) {
    const Config c = LoadConfig(std::string(UP_SOURCE_DIR) + "/configs/brats16g.yaml",
                                {std::string("pipeline.activations=") + policy});
    const auto rows = PlanMemory(c, ParseBytes("16GiB"));
    const PartsPlan two = PlanParts(c);
    ASSERT_EQ(two.stages.size(), 2u);
    EXPECT_EQ(two.stages[0].key, "encoder");
    EXPECT_EQ(two.shared_device_bytes, rows[std::string(policy) == "keep" ? 2 : 3].peak_bytes)
        << policy;
    const PartsPlan six =
        PlanParts(LoadConfig(std::string(UP_SOURCE_DIR) + "/configs/brats16g.yaml",
                             {std::string("pipeline.activations=") + policy,
                              "pipeline.encoder_parts=3", "pipeline.decoder_parts=3"}));
    ASSERT_EQ(six.stages.size(), 6u);
    EXPECT_EQ(six.stages[4].key, "decoder2");
    EXPECT_LT(six.own_device_bytes, two.own_device_bytes) << policy;
    int64_t state = 0;
    for (const StagePlan& s : six.stages) state += s.state_bytes;
    EXPECT_EQ(state, two.stages[0].state_bytes + two.stages[1].state_bytes);
  }
  const Config c = LoadConfig(std::string(UP_SOURCE_DIR) + "/configs/brats16g.yaml", {});
  // A budget between what two and what more parts need: the fewest that fit.
  const PartsPlan two = PlanParts(c);
  const int64_t budget = two.own_device_bytes - 1;
  const auto fewest = FewestPartsThatFit(c, budget, /*shared=*/false);
  ASSERT_TRUE(fewest.has_value());
  const int stages = fewest->encoder_parts + fewest->decoder_parts;
  EXPECT_GT(stages, 2);
  EXPECT_LE(fewest->own_device_bytes, budget);
  // No split into fewer stages fits, and none of as many has a lower peak:
  // the halves need not be cut alike.
  for (int e = 1; e <= 5; ++e) {
    for (int d = 1; d <= 4 && e + d <= stages; ++d) {
      const PartsPlan p =
          PlanParts(LoadConfig(std::string(UP_SOURCE_DIR) + "/configs/brats16g.yaml",
                               {"pipeline.encoder_parts=" + std::to_string(e),
                                "pipeline.decoder_parts=" + std::to_string(d)}));
      if (e + d < stages) EXPECT_GT(p.own_device_bytes, budget) << e << "," << d;
      if (e + d == stages) EXPECT_GE(p.own_device_bytes, fewest->own_device_bytes) << e << "," << d;
    }
  }
  EXPECT_FALSE(FewestPartsThatFit(c, ParseBytes("1GiB"), true).has_value());
}

}  // namespace
}  // namespace up
