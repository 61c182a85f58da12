// The host memory guard: meminfo read as the kernel writes it, the floor it
// trims under, and a process's kept blocks really going back to the kernel
// when the machine runs short (and staying while it does not).
#include "common/device/host_memory_guard.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <torch/torch.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "common/base/proc_stats.h"
#include "common/device/tensor_accounting.h"

namespace up {
namespace host_memory_guard_test {

constexpr int64_t kGiB = 1LL << 30;
constexpr int64_t kMiB = 1LL << 20;

std::string WriteMeminfo(const std::string& text) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("meminfo-" + std::to_string(getpid()))).string();
  std::ofstream(path) << text;
  return path;
}

TEST(HostMemoryGuard, ReadsMeminfoAsTheKernelWritesIt) {
  const std::string path = WriteMeminfo(
      "MemTotal:       24683780 kB\nMemFree:         1234567 kB\n"
      "MemAvailable:   20000000 kB\nBuffers:           12345 kB\n");
  const std::optional<HostMemory> m = ReadHostMemory(path);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->total, 24683780LL * 1024);
  EXPECT_EQ(m->available, 20000000LL * 1024);
  std::ofstream(path) << "MemTotal:       24683780 kB\nMemFree:         1234567 kB\n";
  EXPECT_FALSE(ReadHostMemory(path).has_value()) << "no MemAvailable line";
  std::remove(path.c_str());
  EXPECT_FALSE(ReadHostMemory("/nonexistent/meminfo").has_value());
  EXPECT_TRUE(ReadHostMemory().has_value()) << "this machine's /proc/meminfo";
}

TEST(HostMemoryGuard, TrimsUnderAnEighthOfTheMachineBetweenOneAndEightGiB) {
  unsetenv("UP_HOST_TRIM_BELOW");
  EXPECT_EQ(TrimFloorBytes(24 * kGiB), 3 * kGiB);
  EXPECT_EQ(TrimFloorBytes(4 * kGiB), kGiB);
  EXPECT_EQ(TrimFloorBytes(128 * kGiB), 8 * kGiB);
  setenv("UP_HOST_TRIM_BELOW", "5GiB", 1);
  EXPECT_EQ(TrimFloorBytes(24 * kGiB), 5 * kGiB);
  unsetenv("UP_HOST_TRIM_BELOW");
}

// A freed 256 MiB tensor stays in the process while memory is plenty (the
// keep policy: its next step does not fault it in again), and goes back to
// the kernel once the machine is short.
TEST(HostMemoryGuard, KeptBlocksGoBackWhenTheMachineIsShort) {
  InstallTensorAccounting();
  const std::optional<HostMemory> machine = ReadHostMemory();
  ASSERT_TRUE(machine.has_value());
  if (machine->available < TrimFloorBytes(machine->total) + kGiB) {
    GTEST_SKIP() << "this machine has " << machine->available / kMiB
                 << " MiB available, near the guard's floor: its own thread would trim";
  }
  const int64_t before = CurrentRssBytes();
  ASSERT_GT(before, 0);
  {
    torch::Tensor big = torch::ones({64 * kMiB}, torch::kFloat32);  // 256 MiB, written
    ASSERT_GT(CurrentRssBytes() - before, 200 * kMiB);
  }
  const int64_t kept = CurrentRssBytes();
  EXPECT_GT(kept - before, 200 * kMiB) << "freed blocks are kept while memory is plenty";
  EXPECT_FALSE(TrimIfShort(HostMemory{24 * kGiB, 20 * kGiB}, 3 * kGiB));
  EXPECT_GT(CurrentRssBytes() - before, 200 * kMiB);
  const int64_t trims = HostMemoryTrims();
  EXPECT_TRUE(TrimIfShort(HostMemory{24 * kGiB, 2 * kGiB}, 3 * kGiB));
  EXPECT_EQ(HostMemoryTrims(), trims + 1);
  EXPECT_LT(CurrentRssBytes() - before, 64 * kMiB) << "given back when the machine is short";
}

}  // namespace host_memory_guard_test
}  // namespace up
