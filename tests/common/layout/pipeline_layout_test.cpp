// The pipeline's layout (common/layout/pipeline_layout.h): which levels each part
// runs, what flows between which stages (every skip straight from its maker
// to its user, never relayed), in what order and shape, the placement lists,
// and one "config: ..." line for every cut, part count or list the model
// cannot take.
#include "common/layout/pipeline_layout.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "common/base/errors.h"
#include "common/config/config_file.h"

namespace up {
namespace {

#define EXPECT_HAS(message, piece) \
  EXPECT_NE((message).find(piece), std::string::npos) << "message: " << (message)

// tiny.yaml's model: 2-D, features [8, 16, 32, 64] (4 skips, level 4 the
// bottleneck), 64x64, batch 8 in 2 micro-batches.
PipelineLayout Layout(std::vector<std::string> overrides) {
  overrides.insert(overrides.begin(), {"data.size=64", "model.features=[8,16,32,64]"});
  return ResolveLayout(LoadConfig("", overrides));
}

std::string LayoutErrorOf(std::vector<std::string> overrides) {
  try {
    Layout(std::move(overrides));
  } catch (const UsageError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.rfind("config: ", 0), 0u) << message;
    return message;
  }
  return "<no error>";
}

std::vector<std::string> Names(const StageChannel& c) {
  std::vector<std::string> out;
  for (const WireTensor& t : c.tensors) out.push_back(t.name);
  return out;
}

TEST(PipelineLayout, TwoStagesAreOneChannelInTheBoundarysOrder) {
  const PipelineLayout l = Layout({});
  ASSERT_EQ(l.size(), 2);
  EXPECT_TRUE(l.two_stage());
  EXPECT_EQ(l.stages[0].Key(), "encoder");
  EXPECT_EQ(l.stages[1].Name(), "decoder");
  EXPECT_EQ(l.stages[0].lo, 0);
  EXPECT_EQ(l.stages[0].hi, 4);
  EXPECT_EQ(l.stages[1].hi, 3);
  EXPECT_EQ(l.stages[1].lo, 0);
  ASSERT_EQ(l.channels.size(), 1u);
  EXPECT_EQ(Names(l.channels[0]),
            (std::vector<std::string>{"bottleneck", "skip0", "skip1", "skip2", "skip3"}));
  EXPECT_EQ(l.channels[0].tensors[0].shape, (std::vector<int64_t>{4, 128, 4, 4}));
  EXPECT_EQ(l.channels[0].tensors[1].shape, (std::vector<int64_t>{4, 8, 64, 64}));
  EXPECT_EQ(ChannelRingName("up-1-ab", l.channels[0], true), "up-1-ab-0to1-fwd");
  EXPECT_EQ(ChannelRingName("up-1-ab", l.channels[0], false), "up-1-ab-0to1-bwd");
}

TEST(PipelineLayout, EverySkipGoesStraightFromItsMakerToItsUser) {
  const PipelineLayout l = Layout({"pipeline.cuts.encoder=[2, 4]", "pipeline.cuts.decoder=[1, 3]"});
  ASSERT_EQ(l.size(), 6);
  // encoder parts: levels 0-1, 2-3, 4; decoder parts (run order): 3, 2-1, 0.
  EXPECT_EQ(l.stages[1].LevelsText(), "levels 2-3");
  EXPECT_EQ(l.stages[2].LevelsText(), "level 4");
  EXPECT_EQ(l.stages[4].LevelsText(), "levels 2-1");
  EXPECT_EQ(l.stages[4].Name(), "decoder part 2 of 3");
  EXPECT_EQ(l.stages[4].Key(), "decoder2");
  EXPECT_EQ(l.InputName(0), "");
  EXPECT_EQ(l.InputName(1), "skip1");
  EXPECT_EQ(l.InputName(3), "bottleneck");
  EXPECT_EQ(l.InputName(4), "up3");
  // Each tensor has one producer; each (producer, consumer) pair one channel.
  std::set<std::pair<int, int>> pairs;
  for (const StageChannel& c : l.channels) {
    EXPECT_LT(c.from, c.to);
    EXPECT_TRUE(pairs.insert({c.from, c.to}).second);
  }
  auto channel = [&](int from, int to) -> std::vector<std::string> {
    for (const StageChannel& c : l.channels)
      if (c.from == from && c.to == to) return Names(c);
    return {};
  };
  EXPECT_EQ(channel(0, 1), (std::vector<std::string>{"skip1"}));  // the chain
  EXPECT_EQ(channel(0, 5), (std::vector<std::string>{"skip0"}));  // straight to level 0
  EXPECT_EQ(channel(0, 4), (std::vector<std::string>{"skip1"}));  // and to level 1
  EXPECT_EQ(channel(1, 2), (std::vector<std::string>{"skip3"}));
  EXPECT_EQ(channel(1, 3), (std::vector<std::string>{"skip3"}));
  EXPECT_EQ(channel(1, 4), (std::vector<std::string>{"skip2"}));
  EXPECT_EQ(channel(2, 3), (std::vector<std::string>{"bottleneck"}));
  EXPECT_EQ(channel(3, 4), (std::vector<std::string>{"up3"}));
  EXPECT_EQ(channel(4, 5), (std::vector<std::string>{"up1"}));
  EXPECT_TRUE(channel(0, 2).empty());
  EXPECT_EQ(l.EncoderStageOf(3), 1);
  EXPECT_EQ(l.DecoderStageOf(0), 5);
}

TEST(PipelineLayout, BalancedCutsWithoutGivenOnes) {
  const PipelineLayout l = Layout({"pipeline.encoder_parts=2", "pipeline.decoder_parts=2"});
  ASSERT_EQ(l.size(), 4);
  EXPECT_EQ(l.encoder_cuts.size(), 1u);
  EXPECT_EQ(l.decoder_cuts.size(), 1u);
  // Each half splits inside, every part holding adjacent levels.
  EXPECT_EQ(l.stages[0].lo, 0);
  EXPECT_EQ(l.stages[1].hi, 4);
  EXPECT_EQ(l.stages[2].hi, 3);
  EXPECT_EQ(l.stages[1].lo, l.stages[0].hi + 1);
  EXPECT_EQ(l.stages[3].lo, 0);
  EXPECT_EQ(l.stages[2].lo, l.stages[3].hi + 1);
}

TEST(PipelineLayout, MirroredPutsEachDecoderPartWithItsEncoderPart) {
  const PipelineLayout l =
      Layout({"pipeline.encoder_parts=2", "pipeline.decoder_parts=2", "pipeline.placement=mirrored",
              "pipeline.devices=[cuda:0, cuda:1]", "pipeline.nodes=[0, 1]"});
  ASSERT_EQ(l.size(), 4);
  // The bottleneck shares the last encoder part; the decoder's cuts mirror the encoder's.
  EXPECT_EQ(l.stages[1].hi, 4);
  EXPECT_EQ(l.stages[2].hi, 3);
  EXPECT_EQ(l.stages[2].lo, l.stages[1].lo);
  EXPECT_EQ(l.stages[3].hi, l.stages[0].hi);
  EXPECT_EQ(l.stages[0].device, "cuda:0");
  EXPECT_EQ(l.stages[1].device, "cuda:1");
  EXPECT_EQ(l.stages[2].device, "cuda:1");
  EXPECT_EQ(l.stages[3].device, "cuda:0");
  EXPECT_EQ(l.stages[2].node, 1);
  EXPECT_EQ(l.stages[3].node, 0);
  // So no skip leaves its device: only the chain crosses between the two.
  for (const StageChannel& c : l.channels) {
    const StageSpec& to = l.stages[static_cast<size_t>(c.to)];
    if (to.encoder || Names(c)[0].rfind("up", 0) == 0) continue;
    EXPECT_EQ(l.stages[static_cast<size_t>(c.from)].device, to.device) << c.from << ">" << c.to;
  }
}

TEST(PipelineLayout, DevicesAndNodesListEveryStage) {
  const PipelineLayout l =
      Layout({"pipeline.decoder_parts=2", "pipeline.devices=[cpu, cuda, cuda:1]",
              "pipeline.nodes=[0, 0, 1]"});
  EXPECT_EQ(l.stages[1].device, "cuda");
  EXPECT_EQ(l.stages[2].device, "cuda:1");
  EXPECT_EQ(l.stages[2].node, 1);
  // Without the lists, each half's parts take the two-stage keys.
  const PipelineLayout k =
      Layout({"pipeline.encoder_parts=2", "pipeline.stages.decoder.device=cuda:1"});
  EXPECT_EQ(k.stages[0].device, "auto");
  EXPECT_EQ(k.stages[1].device, "auto");
  EXPECT_EQ(k.stages[2].device, "cuda:1");
}

TEST(PipelineLayout, DeepSupervisionSendsTheHeadsToTheLoss) {
  const std::string plans = std::string(UP_SOURCE_DIR) + "/configs/nnunet/tiny_plans.json";
  const Config c =
      LoadConfig("", {"model.kind=nnunet", "model.plans=" + plans, "model.configuration=2d",
                      "model.in_channels=2", "model.num_classes=3", "pipeline.decoder_parts=3"});
  ASSERT_TRUE(c.train.deep_supervision);
  const PipelineLayout l = ResolveLayout(c);
  ASSERT_EQ(l.levels, 3);
  ASSERT_EQ(l.size(), 4);
  // decoder parts: level 2, level 1, level 0. logits1 goes to the loss; the
  // lowest resolution's weight is 0, so logits2 goes nowhere.
  std::vector<std::string> into_last;
  for (const StageChannel* ch : l.Into(3))
    for (const WireTensor& t : ch->tensors) into_last.push_back(t.name);
  EXPECT_EQ(into_last, (std::vector<std::string>{"skip0", "up1", "logits1"}));
  for (const StageChannel& ch : l.channels)
    for (const WireTensor& t : ch.tensors) EXPECT_NE(t.name, "logits2");
}

TEST(PipelineLayout, WhatTheModelCannotTakeIsOneLineNamingTheKey) {
  EXPECT_HAS(LayoutErrorOf({"pipeline.encoder_parts=6"}),
             "pipeline.encoder_parts = 6: must be in [1, 5], one part per level at most");
  EXPECT_HAS(LayoutErrorOf({"pipeline.decoder_parts=5"}),
             "pipeline.decoder_parts = 5: must be in [1, 4]");
  EXPECT_HAS(LayoutErrorOf({"pipeline.cuts.encoder=[3, 2]"}), "cut 2 would leave a part empty");
  EXPECT_HAS(LayoutErrorOf({"pipeline.cuts.encoder=[5]"}), "each in [1, 4] (5 levels)");
  EXPECT_HAS(LayoutErrorOf({"pipeline.cuts.decoder=[4]"}),
             "pipeline.cuts.decoder = [4] (decoder levels in the order they run, 0 = level 3)");
  EXPECT_HAS(LayoutErrorOf({"pipeline.encoder_parts=3", "pipeline.cuts.encoder=[1]"}),
             "pipeline.cuts.encoder = [1]: makes 2 parts, but pipeline.encoder_parts is 3");
  EXPECT_HAS(LayoutErrorOf({"pipeline.decoder_parts=2", "pipeline.devices=[cpu, cpu]"}),
             "pipeline.devices has 2 entries, expected 3");
  EXPECT_HAS(LayoutErrorOf({"pipeline.nodes=[0]"}), "pipeline.nodes has 1 entries, expected 2");
  EXPECT_HAS(LayoutErrorOf({"pipeline.devices=[cpu, gpu]"}),
             "pipeline.devices = [\"cpu\", \"gpu\"]");
  EXPECT_HAS(LayoutErrorOf({"pipeline.placement=mirrored", "pipeline.encoder_parts=2"}),
             "pipeline.decoder_parts (1) must equal pipeline.encoder_parts (2)");
  EXPECT_HAS(LayoutErrorOf({"pipeline.encoder_parts=0"}),
             "pipeline.encoder_parts = 0: must be in [1, 64]");
}

TEST(PipelineLayout, StageIndexOfAPart) {
  const PipelineLayout l = Layout({"pipeline.encoder_parts=2", "pipeline.decoder_parts=3"});
  EXPECT_EQ(StageIndexOf(l, true, 1, "--part"), 1);
  EXPECT_EQ(StageIndexOf(l, false, 0, "--part"), 2);
  EXPECT_EQ(StageIndexOf(l, false, 2, "--part"), 4);
  try {
    StageIndexOf(l, true, 2, "--part");
    ADD_FAILURE() << "accepted";
  } catch (const UsageError& e) {
    EXPECT_HAS(std::string(e.what()), "--part 3: the encoder has 2 parts");
  }
}

TEST(PipelineLayout, TheDumpKeepsTheStages) {
  const Config two = LoadConfig("", {});
  EXPECT_NE(DumpConfig(two).find("  encoder_parts: 1\n  decoder_parts: 1\n"), std::string::npos)
      << DumpConfig(two);
  EXPECT_NE(DumpConfig(two).find("  cuts:\n    encoder: []\n    decoder: []\n"), std::string::npos)
      << DumpConfig(two);
  // Parts given as the cuts make them: the same config.
  EXPECT_EQ(ConfigHash(LoadConfig("", {"pipeline.encoder_parts=1", "pipeline.cuts.decoder=[]"})),
            ConfigHash(two));
  const Config six = LoadConfig("", {"pipeline.cuts.encoder=[2, 4]", "pipeline.decoder_parts=2",
                                     "pipeline.devices=[cpu, cpu, cpu, cpu, cpu]"});
  const std::string dump = DumpConfig(six);
  EXPECT_EQ(DumpConfig(LoadConfigFromString(dump, "dump", {})), dump);
  EXPECT_EQ(ResolveLayout(LoadConfigFromString(dump, "dump", {})).size(), 5);
}

}  // namespace
}  // namespace up

namespace up {
namespace {

// pipeline.replicas: replica r's CUDA stages move up by the devices one
// replica takes; CPU stages stay; each replica's micro-batches are 1/R the
// size; the keys of replicas other than 0 carry their number.
TEST(PipelineLayout, ReplicasGetTheirOwnDevicesAndSmallerMicroBatches) {
  const Config two = LoadConfig("", {"data.size=64", "model.features=[8,16,32,64]",
                                     "pipeline.devices=[cuda:0,cuda:1]", "pipeline.replicas=2"});
  const PipelineLayout r1 = ResolveLayout(two, 1);
  EXPECT_EQ(r1.stages[0].device, "cuda:2");
  EXPECT_EQ(r1.stages[1].device, "cuda:3");
  const Config shared = LoadConfig(
      "", {"data.size=64", "model.features=[8,16,32,64]", "pipeline.stages.encoder.device=cuda",
           "pipeline.stages.decoder.device=cuda", "pipeline.replicas=4"});
  EXPECT_EQ(ResolveLayout(shared, 3).stages[0].device, "cuda:3");
  EXPECT_EQ(ResolveLayout(shared, 3).stages[1].device, "cuda:3");
  const Config cpu = LoadConfig(
      "", {"data.size=64", "model.features=[8,16,32,64]", "pipeline.stages.encoder.device=cpu",
           "pipeline.stages.decoder.device=cpu", "pipeline.replicas=2"});
  const PipelineLayout c1 = ResolveLayout(cpu, 1);
  EXPECT_EQ(c1.stages[0].device, "cpu");
  // batch 8 = 2 replicas x 2 micro-batches x 2 samples.
  EXPECT_EQ(c1.channels[0].tensors[0].shape[0], 2);
  EXPECT_EQ(ResolveLayout(cpu, 0).channels[0].tensors[0].shape[0], 2);
  EXPECT_EQ(ReplicaKey("decoder2", 0), "decoder2");
  EXPECT_EQ(ReplicaKey("decoder2", 3), "decoder2.r3");
}

}  // namespace
}  // namespace up

namespace up {
namespace {

// Replicas over machines: nodes of their own when the replicas divide the
// nodes, whole replicas a node when the nodes divide the replicas.
TEST(PipelineLayout, ReplicasOverNodes) {
  EXPECT_EQ(ReplicaNodes(2, 4), 2);
  EXPECT_EQ(ReplicaFirstNode(2, 4, 1), 2);
  EXPECT_EQ(ReplicaSlot(2, 4, 1), 0);
  EXPECT_EQ(ReplicaNodes(4, 2), 1);
  EXPECT_EQ(ReplicaFirstNode(4, 2, 3), 1);
  EXPECT_EQ(ReplicaSlot(4, 2, 3), 1);
  EXPECT_EQ(ReplicaSlot(3, 1, 2), 2);  // one machine: the replica itself
  EXPECT_EQ(ReplicaNodes(2, 3), 0);    // neither divides: refused by the placement
  EXPECT_EQ(ReplicaFirstNode(2, 3, 1), 0);
}

}  // namespace
}  // namespace up
