// Device locks and pipeline.lock resolution.
#include "launcher/device_lock.h"

#include <gtest/gtest.h>

#include "common/base/errors.h"

namespace up {
namespace {

TEST(ResolveLock, AutoIsOnExactlyWhenStagesShareADevice) {
  EXPECT_TRUE(ResolveLock(Lock::kAuto, "cpu", "cpu", Schedule::kSequential));
  EXPECT_TRUE(ResolveLock(Lock::kAuto, "cuda", "cuda:0", Schedule::kSequential));
  EXPECT_FALSE(ResolveLock(Lock::kAuto, "cuda:0", "cuda:1", Schedule::kSequential));
  EXPECT_FALSE(ResolveLock(Lock::kAuto, "cuda:0", "cuda:1", Schedule::k1f1b));
  EXPECT_TRUE(ResolveLock(Lock::kOn, "cuda:0", "cuda:1", Schedule::kSequential));
  EXPECT_FALSE(ResolveLock(Lock::kOff, "cpu", "cpu", Schedule::kGpipe));
  // Any number of stages: on when any two share a device.
  EXPECT_TRUE(
      ResolveLock(Lock::kAuto, {"cuda:0", "cuda:1", "cuda:2", "cuda"}, Schedule::kSequential));
  EXPECT_FALSE(
      ResolveLock(Lock::kAuto, {"cuda:0", "cuda:1", "cuda:2", "cuda:3"}, Schedule::kGpipe));
  EXPECT_THROW(ResolveLock(Lock::kAuto, {"cuda:0", "cuda:1", "cuda:1"}, Schedule::kGpipe),
               UsageError);
}

TEST(ResolveLock, OverlappedScheduleOnASharedLockIsAUsageError) {
  try {
    ResolveLock(Lock::kAuto, "cpu", "cpu", Schedule::kGpipe);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("pipeline.lock: off"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ResolveLock(Lock::kOn, "cuda:0", "cuda:1", Schedule::k1f1b), UsageError);
}

TEST(DeviceLocks, OneHolderPerDevice) {
  DeviceLocks locks(true);
  EXPECT_TRUE(locks.TryAcquire("cpu", 0));
  EXPECT_FALSE(locks.TryAcquire("cpu", 1));
  EXPECT_EQ(locks.Holder("cpu"), 0);
  EXPECT_TRUE(locks.TryAcquire("cuda:1", 1)) << "other devices are independent";
  locks.Release("cpu", 0);
  EXPECT_FALSE(locks.Holder("cpu"));
  EXPECT_TRUE(locks.TryAcquire("cpu", 1));
  EXPECT_THROW(locks.Release("cpu", 0), RuntimeError);
}

TEST(DeviceLocks, DisabledNeverBlocks) {
  DeviceLocks locks(false);
  EXPECT_TRUE(locks.TryAcquire("cpu", 0));
  EXPECT_TRUE(locks.TryAcquire("cpu", 1));
}

}  // namespace
}  // namespace up
