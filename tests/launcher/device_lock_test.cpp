// Device locks and pipeline.lock resolution.
#include "launcher/device_lock.h"

#include <gtest/gtest.h>

#include "common/errors.h"

namespace up {
namespace {

TEST(ResolveLock, AutoIsOnExactlyWhenStagesShareADevice) {
  EXPECT_TRUE(ResolveLock("auto", "cpu", "cpu", "sequential"));
  EXPECT_TRUE(ResolveLock("auto", "cuda", "cuda:0", "sequential"));
  EXPECT_FALSE(ResolveLock("auto", "cuda:0", "cuda:1", "sequential"));
  EXPECT_FALSE(ResolveLock("auto", "cuda:0", "cuda:1", "1f1b"));
  EXPECT_TRUE(ResolveLock("on", "cuda:0", "cuda:1", "sequential"));
  EXPECT_FALSE(ResolveLock("off", "cpu", "cpu", "gpipe"));
}

TEST(ResolveLock, OverlappedScheduleOnASharedLockIsAUsageError) {
  try {
    ResolveLock("auto", "cpu", "cpu", "gpipe");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("pipeline.lock: off"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ResolveLock("on", "cuda:0", "cuda:1", "1f1b"), UsageError);
}

TEST(DeviceLocks, OneHolderPerDevice) {
  DeviceLocks locks(true);
  EXPECT_TRUE(locks.TryAcquire("cpu", StageId::kEncoder));
  EXPECT_FALSE(locks.TryAcquire("cpu", StageId::kDecoder));
  EXPECT_EQ(locks.Holder("cpu"), StageId::kEncoder);
  EXPECT_TRUE(locks.TryAcquire("cuda:1", StageId::kDecoder)) << "other devices are independent";
  locks.Release("cpu", StageId::kEncoder);
  EXPECT_FALSE(locks.Holder("cpu"));
  EXPECT_TRUE(locks.TryAcquire("cpu", StageId::kDecoder));
  EXPECT_THROW(locks.Release("cpu", StageId::kEncoder), RuntimeError);
}

TEST(DeviceLocks, DisabledNeverBlocks) {
  DeviceLocks locks(false);
  EXPECT_TRUE(locks.TryAcquire("cpu", StageId::kEncoder));
  EXPECT_TRUE(locks.TryAcquire("cpu", StageId::kDecoder));
}

}  // namespace
}  // namespace up
