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
  const auto fewest = FewestPartsThatFit(c, two.own_device_bytes - 1, /*shared=*/false);
  ASSERT_TRUE(fewest.has_value());
  EXPECT_GT(fewest->encoder_parts, 1);
  EXPECT_LT(fewest->own_device_bytes, two.own_device_bytes);
  EXPECT_FALSE(FewestPartsThatFit(c, ParseBytes("1GiB"), true).has_value());
}

}  // namespace
}  // namespace up
