// See host_memory_guard.h.
#include "common/device/host_memory_guard.h"

#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/base/byte_size.h"
#include "common/base/logging.h"

namespace up {
namespace {

constexpr int64_t kGiB = 1LL << 30;
constexpr auto kLookEvery = std::chrono::milliseconds(100);

std::atomic<bool> g_started{false};
std::atomic<int64_t> g_trims{0};

}  // namespace

std::optional<HostMemory> ReadHostMemory(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  int64_t total = -1, available = -1;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key;
    int64_t kib = 0;
    if (!(fields >> key >> kib)) continue;
    if (key == "MemTotal:") total = kib * 1024;
    if (key == "MemAvailable:") available = kib * 1024;
  }
  if (total < 0 || available < 0) return std::nullopt;
  return HostMemory{total, available};
}

int64_t TrimFloorBytes(int64_t total) {
  if (const char* given = std::getenv("UP_HOST_TRIM_BELOW")) {
    return ParseByteSize(given, "UP_HOST_TRIM_BELOW");
  }
  return std::clamp(total / 8, kGiB, 8 * kGiB);
}

bool TrimIfShort(const HostMemory& memory, int64_t floor) {
  if (memory.available >= floor) return false;
  malloc_trim(0);
  g_trims.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void StartHostMemoryGuard() {
  if (g_started.exchange(true)) return;
  const std::optional<HostMemory> first = ReadHostMemory();
  if (!first) return;
  const int64_t floor = TrimFloorBytes(first->total);
  // Detached: it holds nothing but its loop, and ends with the process.
  std::thread([floor] {
    bool short_before = false;
    for (;;) {
      std::this_thread::sleep_for(kLookEvery);
      const std::optional<HostMemory> now = ReadHostMemory();
      if (!now) continue;
      const bool short_now = TrimIfShort(*now, floor);
      if (short_now && !short_before) {
        LogDebug("host memory: " + FormatBytes(now->available) + " available, under " +
                 FormatBytes(floor) + ": giving freed tensor blocks back to the kernel");
      }
      short_before = short_now;
    }
  }).detach();
}

int64_t HostMemoryTrims() { return g_trims.load(std::memory_order_relaxed); }

}  // namespace up
