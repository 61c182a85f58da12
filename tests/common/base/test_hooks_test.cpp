// Which processes and points a test hook may name (common/base/test_hooks.h):
// stages by their keys, parts and replicas included, and the launcher.
#include "common/base/test_hooks.h"

#include <gtest/gtest.h>

namespace up {
namespace {

TEST(TestHooks, StagesPartsAndReplicasByTheirKeys) {
  for (const char* who :
       {"encoder", "decoder", "encoder2", "decoder3", "decoder.r1", "encoder2.r12"})
    EXPECT_TRUE(IsTestHookPoint(who, "backward")) << who;
  EXPECT_TRUE(IsTestHookPoint("launcher", "turn"));
  for (const char* who : {"decoder.r", "decoder.rx", "decoderx", "encoder.r1.r2", "stage", ""})
    EXPECT_FALSE(IsTestHookPoint(who, "backward")) << who;
  EXPECT_FALSE(IsTestHookPoint("decoder.r1", "no-such-point"));
}

}  // namespace
}  // namespace up
