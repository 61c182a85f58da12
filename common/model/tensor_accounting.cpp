// See tensor_accounting.h.
#include "common/model/tensor_accounting.h"

#include <c10/core/CPUAllocator.h>

#include <malloc.h>
#include <algorithm>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <string>

#include "common/model/device_memory.h"

namespace up {
namespace {

constexpr size_t kHeader = 64;  // keeps the data at LibTorch's 64-byte alignment

std::atomic<int64_t> g_live{0};
std::atomic<int64_t> g_peak{0};
std::atomic<bool> g_installed{false};

void RaisePeak(int64_t live) {
  int64_t peak = g_peak.load(std::memory_order_relaxed);
  while (live > peak && !g_peak.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
  }
}

void Free(void* data) {
  if (data == nullptr) return;  // zero-byte tensors have no block
  char* base = static_cast<char*>(data) - kHeader;
  int64_t bytes;
  std::memcpy(&bytes, base, sizeof(bytes));
  g_live.fetch_sub(bytes, std::memory_order_relaxed);
  std::free(base);
}

class CountingCpuAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    if (n == 0) return {nullptr, nullptr, &Free, c10::Device(c10::DeviceType::CPU)};
    void* base = nullptr;
    if (posix_memalign(&base, kHeader, n + kHeader) != 0) {
      TORCH_CHECK_WITH(OutOfMemoryError, false,
                       "DefaultCPUAllocator: can't allocate memory: "
                       "you tried to allocate ",
                       n, " bytes.");
    }
    const int64_t bytes = static_cast<int64_t>(n);
    std::memcpy(base, &bytes, sizeof(bytes));
    RaisePeak(g_live.fetch_add(bytes, std::memory_order_relaxed) + bytes);
    void* data = static_cast<char*>(base) + kHeader;
    return {data, data, &Free, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &Free; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

CountingCpuAllocator g_allocator;

}  // namespace

void InstallTensorAccounting() {
  if (g_installed.exchange(true)) return;
  // Keep freed tensor blocks in the process: by default glibc serves blocks
  // above its mmap threshold (at most 32 MiB) with fresh mappings and trims
  // the heap's free top, so every step faults its large tensors in again
  // (64 MiB blocks measured here: 38 ms a block against 5.6 ms kept). The
  // equivalent of GLIBC_TUNABLES=glibc.malloc.mmap_threshold=...:trim_threshold=...,
  // set here so no user has to know it; UP_GLIBC_MALLOC_DEFAULTS=1 turns it off
  // (for measuring its effect).
  const char* defaults = std::getenv("UP_GLIBC_MALLOC_DEFAULTS");
  if (defaults == nullptr || std::string(defaults) != "1") {
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
    mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
  }
  // Priority above LibTorch's own registration, so nothing replaces it later.
  c10::SetCPUAllocator(&g_allocator, /*priority=*/100);
}

bool TensorAccountingInstalled() { return g_installed.load(); }

TensorBytes TensorBytesOn(const torch::Device& device) {
  TensorBytes t;
  if (device.is_cuda()) {
    DeviceTensorStats(device, &t.live, &t.peak, &t.reserved);
    return t;
  }
  t.live = g_live.load(std::memory_order_relaxed);
  t.peak = std::max(g_peak.load(std::memory_order_relaxed), t.live);
  t.reserved = t.peak;
  return t;
}

void ResetPeakTensorBytes(const torch::Device& device) {
  if (device.is_cuda()) {
    ResetDevicePeak(device);
    return;
  }
  g_peak.store(g_live.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

}  // namespace up
