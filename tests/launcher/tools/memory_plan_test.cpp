// The memory plan's arithmetic: parameter counts equal the real modules',
// activation counts match a hand count on a tiny model, and the user's case
// (configs/brats16g.yaml) does not fit 16 GiB in one process but does as a
// pipeline offloading.
#include "launcher/tools/memory_plan.h"

#include <gtest/gtest.h>

#include <iostream>

#include <algorithm>
#include <optional>
#include <stdexcept>

#include "common/base/errors.h"
#include "common/config/config_file.h"
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
    for (Norm norm : {Norm::kBatch, Norm::kInstance}) {
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

// The rows in their order, by name.
const PlanRow& RowNamed(const std::vector<PlanRow>& rows, const std::string& name) {
  for (const PlanRow& r : rows)
    if (r.name == name) return r;
  throw std::runtime_error("no row " + name);
}

const std::vector<std::string> kRowNames{"single-process",
                                         "single-process checkpointing",
                                         "single-process checkpointing blocks",
                                         "single-process offload",
                                         "pipeline keep",
                                         "pipeline recompute",
                                         "pipeline recompute blocks",
                                         "pipeline offload"};

TEST(MemoryPlan, Brats16gNeedsThePipelineOnA16GiBCard) {
  const Config c = LoadConfig(std::string(UP_SOURCE_DIR) + "/configs/brats16g.yaml", {});
  const auto rows = PlanMemory(c, ParseCardBudget("16GiB", "10%").usable_bytes());
  // Each way as written, then its lean twin: the same sets and model.memory: lean.
  ASSERT_EQ(rows.size(), 2 * kRowNames.size());
  for (size_t i = 0; i < kRowNames.size(); ++i) {
    const PlanRow &written = rows[2 * i], &lean = rows[2 * i + 1];
    EXPECT_EQ(written.name, kRowNames[i]);
    EXPECT_EQ(lean.name, kRowNames[i] + " lean");
    EXPECT_FALSE(written.lean);
    EXPECT_TRUE(lean.lean);
    std::vector<std::string> sets = written.sets;
    sets.push_back("model.memory=lean");
    EXPECT_EQ(lean.sets, sets) << lean.name;
    EXPECT_EQ(lean.state_bytes, written.state_bytes) << lean.name;
    EXPECT_LT(lean.activation_bytes, written.activation_bytes) << lean.name;
  }
  // No twins where lean blocks are refused (below fp32), nor for a lean config.
  const std::string path = std::string(UP_SOURCE_DIR) + "/configs/brats16g.yaml";
  for (const char* set : {"train.precision=bf16", "model.memory=lean"}) {
    const auto own = PlanMemory(LoadConfig(path, {set}), ParseBytes("16GiB"));
    ASSERT_EQ(own.size(), kRowNames.size()) << set;
    EXPECT_EQ(own[0].lean, std::string(set) == "model.memory=lean") << set;
  }
  const PlanRow& single = RowNamed(rows, "single-process");
  EXPECT_FALSE(single.fits) << FormatBytes(single.need.total());
  EXPECT_LT(RowNamed(rows, "single-process checkpointing").peak_bytes, single.peak_bytes);
  const PlanRow& recompute = RowNamed(rows, "pipeline recompute");
  EXPECT_TRUE(RowNamed(rows, "pipeline offload").fits)
      << FormatBytes(RowNamed(rows, "pipeline offload").need.total());
  EXPECT_LT(recompute.peak_bytes, single.peak_bytes);
  EXPECT_GE(RowNamed(rows, "pipeline keep").peak_bytes, recompute.peak_bytes)
      << "keep holds more than recompute";
  // How to train each way, and what it costs.
  EXPECT_TRUE(single.single_process);
  EXPECT_EQ(RowNamed(rows, "single-process checkpointing blocks").sets,
            std::vector<std::string>{"train.checkpointing=blocks"});
  EXPECT_EQ(recompute.processes, 2);
  EXPECT_TRUE(recompute.recomputes);
  EXPECT_FALSE(RowNamed(rows, "pipeline keep").recomputes);
  const PlanRow& offload = RowNamed(rows, "pipeline offload");
  EXPECT_TRUE(offload.offload);
  EXPECT_EQ(offload.sets,
            (std::vector<std::string>{"pipeline.park=always", "pipeline.activations=recompute",
                                      "pipeline.recompute_unit=block", "pipeline.offload=on"}));
  // Offloaded, only the unit being rebuilt is on the device.
  EXPECT_LT(offload.peak_bytes, RowNamed(rows, "pipeline recompute blocks").peak_bytes);
  EXPECT_LT(RowNamed(rows, "single-process offload").peak_bytes,
            RowNamed(rows, "single-process checkpointing blocks").peak_bytes);
}

// The floor is one unit of one sample: below every way's peak, and a block
// is smaller than a level.
TEST(MemoryPlan, TheFloorIsBelowEveryWay) {
  const Config c = LoadConfig(std::string(UP_SOURCE_DIR) + "/configs/brats16g.yaml", {});
  const int64_t floor = FloorBytes(c);
  EXPECT_GT(floor, 0);
  for (const PlanRow& r : PlanMemory(c, ParseBytes("16GiB")))
    EXPECT_GT(r.tensor_estimate(), floor) << r.name;
  const StageCounts enc = EncoderCounts(c), dec = DecoderCounts(c);
  EXPECT_LT(enc.largest_block, enc.largest_level);
  EXPECT_LT(dec.largest_block, dec.largest_level);
  EXPECT_LT(enc.checkpoint_elements, enc.block_checkpoint_elements);
}

// model.memory: lean lowers the floor (the decoder's first block, the
// largest, no longer holds its concatenation) and every way's estimate with
// it, and the weights do not change.
TEST(MemoryPlan, LeanLowersTheFloor) {
  for (const char* config : {"brats16g.yaml", "nnunet-resenc-l.yaml"}) {
    const std::string path = std::string(UP_SOURCE_DIR) + "/configs/" + config;
    const Config written = LoadConfig(path, {}), lean = LoadConfig(path, {"model.memory=lean"});
    EXPECT_LT(FloorBytes(lean), FloorBytes(written)) << config;
    EXPECT_EQ(DecoderCounts(lean).parameters, DecoderCounts(written).parameters) << config;
    EXPECT_LT(DecoderCounts(lean).activation_elements, DecoderCounts(written).activation_elements)
        << config;
    std::cout << config << ": floor " << FloorBytes(written) << " B as written, "
              << FloorBytes(lean) << " B lean ("
              << static_cast<double>(FloorBytes(lean)) / FloorBytes(written) << "x)\n";
  }
}

// Least extra work first: no recompute, then fewest processes, then levels.
TEST(MemoryPlan, RecommendsTheLeastExtraWorkThatFits) {
  const Config c = LoadConfig(std::string(UP_SOURCE_DIR) + "/configs/brats16g.yaml", {});
  std::vector<PlanRow> rows = PlanMemory(c, ParseBytes("16GiB"));
  auto fit_only = [&](const std::vector<std::string>& names) {
    for (PlanRow& r : rows) r.fits = std::find(names.begin(), names.end(), r.name) != names.end();
  };
  const CardBudget budget = ParseCardBudget("16GiB", "10%");
  fit_only(kRowNames);
  EXPECT_EQ(Recommend(c, rows, std::nullopt, 1, budget).way, "single-process");
  fit_only({"pipeline keep", "single-process checkpointing", "pipeline recompute"});
  Recommendation r = Recommend(c, rows, std::nullopt, 1, budget);
  EXPECT_EQ(r.way, "pipeline keep") << "no recompute beats fewer processes";
  EXPECT_NE(r.reason.find("single-process needs"), std::string::npos) << r.reason;
  fit_only({"single-process checkpointing blocks", "pipeline recompute"});
  EXPECT_EQ(Recommend(c, rows, std::nullopt, 1, budget).way, "single-process checkpointing blocks");
  fit_only({"single-process offload", "pipeline recompute"});
  EXPECT_EQ(Recommend(c, rows, std::nullopt, 1, budget).way, "pipeline recompute")
      << "no offload beats fewer processes";
  fit_only({"pipeline offload", "single-process offload"});
  EXPECT_EQ(Recommend(c, rows, std::nullopt, 1, budget).way, "single-process offload");
  // Lean blocks cost a few percent: less than any recompute, more than the
  // same way as written.
  fit_only({"single-process lean", "single-process checkpointing"});
  r = Recommend(c, rows, std::nullopt, 1, budget);
  EXPECT_EQ(r.way, "single-process lean");
  EXPECT_EQ(r.sets, std::vector<std::string>{"model.memory=lean"});
  fit_only({"single-process offload lean", "single-process offload"});
  EXPECT_EQ(Recommend(c, rows, std::nullopt, 1, budget).way, "single-process offload");
  fit_only({"pipeline recompute blocks", "pipeline recompute"});
  r = Recommend(c, rows, std::nullopt, 1, budget);
  EXPECT_EQ(r.way, "pipeline recompute");
  EXPECT_FALSE(r.single_process);
  // brats16g recomputes already: only what differs from the config.
  EXPECT_EQ(r.sets, (std::vector<std::string>{"pipeline.park=always"}));
  fit_only({});
  r = Recommend(c, rows, PlanParts(c), 1, budget);
  EXPECT_EQ(r.way, "pipeline parts");
  EXPECT_TRUE(r.fits);
  r = Recommend(c, rows, std::nullopt, 123 << 20, budget);
  EXPECT_EQ(r.way, "none");
  EXPECT_FALSE(r.fits);
  EXPECT_NE(r.reason.find("123"), std::string::npos) << r.reason;
}

// nnU-Net plans are planned by formula (the network's own level counts):
// its parameter counts are the built modules', and the rows are ordered as
// for the classic U-Net.
TEST(MemoryPlan, NnunetPlansByFormula) {
  for (const char* configuration : {"2d", "3d_fullres"}) {
    const Config c = LoadConfigFromString(
        "{}", "test",
        {"model.kind=nnunet",
         std::string("model.plans=") + UP_SOURCE_DIR + "/configs/nnunet/tiny_plans.json",
         std::string("model.configuration=") + configuration, "model.in_channels=2",
         "model.num_classes=3"});
    UNetEncoder enc = MakeEncoder(c);
    UNetDecoder dec = MakeDecoder(c);
    EXPECT_EQ(EncoderCounts(c).parameters, Numel(*enc)) << configuration;
    EXPECT_EQ(DecoderCounts(c).parameters, Numel(*dec)) << configuration;
    const auto rows = PlanMemory(c, ParseBytes("16GiB"));
    ASSERT_EQ(rows.size(), 2 * kRowNames.size());  // each with its lean twin
    for (const PlanRow& r : rows) EXPECT_GT(r.activation_bytes, 0) << configuration << r.name;
    EXPECT_LT(RowNamed(rows, "single-process checkpointing").peak_bytes,
              RowNamed(rows, "single-process").peak_bytes)
        << configuration;
    EXPECT_LE(RowNamed(rows, "pipeline recompute").peak_bytes,
              RowNamed(rows, "pipeline keep").peak_bytes)
        << configuration;
    EXPECT_GT(FloorBytes(c), 0) << configuration;
  }
}

// A way's --set overrides name what differs from the config, defaults
// included, so a probe or the recommended command trains that way whatever
// the config says.
TEST(MemoryPlan, WaySetsSayWhatDiffersFromTheConfig) {
  const std::vector<std::string> base{"pipeline.recompute_unit=block", "pipeline.offload=on",
                                      "train.checkpointing=levels"};
  const std::string path = std::string(UP_SOURCE_DIR) + "/configs/brats16g.yaml";
  const Config c = LoadConfig(path, base);
  EXPECT_EQ(WaySets(c, false, {"pipeline.park=always", "pipeline.activations=keep"}),
            (std::vector<std::string>{"pipeline.activations=keep", "pipeline.recompute_unit=level",
                                      "pipeline.offload=off", "train.checkpointing=off",
                                      "pipeline.park=always"}));
  EXPECT_EQ(WaySets(c, false,
                    {"pipeline.activations=recompute", "pipeline.recompute_unit=block",
                     "pipeline.offload=on"}),
            std::vector<std::string>{"train.checkpointing=off"});
  EXPECT_EQ(WaySets(c, true, {}), std::vector<std::string>{"train.checkpointing=off"});
  EXPECT_EQ(WaySets(c, true, {"train.checkpointing=blocks", "train.offload=on"}),
            (std::vector<std::string>{"train.checkpointing=blocks", "train.offload=on"}));
  // Each way's overrides on top of the config's load: the way is a valid config.
  for (const PlanRow& r : PlanMemory(c, ParseBytes("16GiB"))) {
    std::vector<std::string> sets = base;
    for (const std::string& s : WaySets(c, r.single_process, r.sets)) sets.push_back(s);
    EXPECT_NO_THROW(LoadConfig(path, sets)) << r.name;
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
    EXPECT_EQ(two.shared_device_bytes, RowNamed(rows, std::string("pipeline ") + policy).peak_bytes)
        << policy;
    EXPECT_EQ(two.shared_need.total(),
              RowNamed(rows, std::string("pipeline ") + policy).need.total())
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
  const int64_t budget = two.own_need.total() - 1;
  const auto fewest = FewestPartsThatFit(c, budget, /*shared=*/false);
  ASSERT_TRUE(fewest.has_value());
  const int stages = fewest->encoder_parts + fewest->decoder_parts;
  EXPECT_GT(stages, 2);
  EXPECT_LE(fewest->own_need.total(), budget);
  // No split into fewer stages fits, and none of as many has a lower peak:
  // the halves need not be cut alike.
  for (int e = 1; e <= 5; ++e) {
    for (int d = 1; d <= 4 && e + d <= stages; ++d) {
      const PartsPlan p =
          PlanParts(LoadConfig(std::string(UP_SOURCE_DIR) + "/configs/brats16g.yaml",
                               {"pipeline.encoder_parts=" + std::to_string(e),
                                "pipeline.decoder_parts=" + std::to_string(d)}));
      if (e + d < stages) {
        EXPECT_GT(p.own_need.total(), budget) << e << "," << d;
      }
      if (e + d == stages) {
        EXPECT_GE(p.own_need.total(), fewest->own_need.total()) << e << "," << d;
      }
    }
  }
  EXPECT_FALSE(FewestPartsThatFit(c, ParseBytes("1GiB"), true).has_value());
}

}  // namespace
}  // namespace up
