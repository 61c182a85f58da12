// The memory plan's arithmetic: parameter counts equal the real modules',
// activation counts match a hand count on a tiny model, and the user's case
// (configs/brats16g.yaml) does not fit 16 GiB in one process but does as a
// pipeline.
#include "launcher/tools/memory_plan.h"

#include <gtest/gtest.h>

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
