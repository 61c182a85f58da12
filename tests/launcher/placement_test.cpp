// ResolvePlacement: which node holds each stage, which transports can join
// them, and the device-lock keys, for one and two nodes.
#include "launcher/placement.h"

#include <gtest/gtest.h>

#include "common/base/errors.h"

namespace up {
namespace {

NodeOptions Nodes(int nnodes, int rank = 0, int port = 29500) {
  NodeOptions n;
  n.nnodes = nnodes;
  n.node_rank = rank;
  n.master_port = nnodes > 1 ? port : 0;
  return n;
}

// Devices as the launcher hands them over: `auto` already resolved (here to
// the CPU, as on a machine without a GPU).
PipelineConfig OnCpu() {
  PipelineConfig p;
  p.encoder.device = p.decoder.device = "cpu";
  return p;
}

PipelineConfig Gloo() {
  PipelineConfig p = OnCpu();
  p.transport = TransportKind::kGloo;
  return p;
}

std::string UsageMessage(const PipelineConfig& p, const NodeOptions& n) {
  try {
    ResolvePlacement(p, n);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(Placement, OneNodeKeepsBothStagesAndPlainLockKeys) {
  const Placement pl = ResolvePlacement(OnCpu(), Nodes(1));
  EXPECT_EQ(pl.node[0], 0);
  EXPECT_EQ(pl.node[1], 0);
  EXPECT_EQ(pl.lock_key[0], "cpu");
  EXPECT_EQ(pl.lock_key[1], "cpu");
  EXPECT_FALSE(pl.c10d);
  EXPECT_TRUE(pl.Local(0, 0) && pl.Local(1, 0));
}

TEST(Placement, TwoNodesPutTheDecoderOnNodeOneByDefault) {
  const Placement pl = ResolvePlacement(Gloo(), Nodes(2, 1));
  EXPECT_EQ(pl.node[0], 0);
  EXPECT_EQ(pl.node[1], 1);
  EXPECT_TRUE(pl.c10d);
  EXPECT_FALSE(pl.Local(0, 1));
  EXPECT_TRUE(pl.Local(1, 1));
  // Same device name on two machines: different locks, so no turn-taking.
  EXPECT_EQ(pl.lock_key[0], "node0/cpu");
  EXPECT_EQ(pl.lock_key[1], "node1/cpu");
}

TEST(Placement, ExplicitNodesAreKept) {
  PipelineConfig p = Gloo();
  p.encoder.node = 1;
  p.decoder.node = 0;
  const Placement pl = ResolvePlacement(p, Nodes(2));
  EXPECT_EQ(pl.node[0], 1);
  EXPECT_EQ(pl.node[1], 0);
}

TEST(Placement, ShmCannotCrossMachines) {
  const std::string m = UsageMessage(OnCpu(), Nodes(2));
  EXPECT_NE(m.find("pipeline.transport = shm cannot cross machines"), std::string::npos) << m;
  EXPECT_NE(m.find("gloo"), std::string::npos) << m;
}

TEST(Placement, BadFlagsAndNodesAreNamed) {
  EXPECT_NE(UsageMessage(Gloo(), Nodes(3)).find("--nnodes 3"), std::string::npos);
  EXPECT_NE(UsageMessage(Gloo(), Nodes(2, 2)).find("--node-rank 2"), std::string::npos);
  EXPECT_NE(UsageMessage(Gloo(), Nodes(2, 0, 0)).find("--master-port 0"), std::string::npos);
  EXPECT_NE(UsageMessage(Gloo(), Nodes(2, 0, 70000)).find("--master-port 70000"),
            std::string::npos);
  PipelineConfig p = Gloo();
  p.decoder.node = 3;
  EXPECT_NE(UsageMessage(p, Nodes(2)).find("pipeline.stages.decoder.node = 3"), std::string::npos);
  p.decoder.node = 1;
  p.encoder.node = 1;
  EXPECT_NE(UsageMessage(p, Nodes(2)).find("node 0 would hold nothing"), std::string::npos);
  EXPECT_NE(UsageMessage(p, Nodes(1)).find("pipeline.stages.encoder.node = 1"), std::string::npos);
}

}  // namespace
}  // namespace up
