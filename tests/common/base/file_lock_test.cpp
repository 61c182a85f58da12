// FileLock: a second holder waits (told once) until the first lets go, and
// the lock file may already exist.
#include "common/base/file_lock.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "common/base/errors.h"

namespace up {
namespace {

TEST(FileLock, ASecondHolderWaitsForTheFirst) {
  char dir[] = "/tmp/up-lock-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/.lock";
  std::atomic<bool> released{false}, told{false}, second_held{false};
  std::thread second;
  {
    const FileLock first(path);
    second = std::thread([&] {
      const FileLock again(path, [&] { told = true; });
      second_held = true;
      EXPECT_TRUE(released.load());  // not before the first let go
    });
    while (!told) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(second_held.load());
    released = true;
  }
  second.join();
  EXPECT_TRUE(second_held.load());
  { const FileLock third(path); }  // free again, the file kept
  unlink(path.c_str());
  rmdir(dir);
  EXPECT_THROW(FileLock("/nonexistent-dir/.lock"), RuntimeError);
}

}  // namespace
}  // namespace up
