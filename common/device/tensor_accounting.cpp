// See tensor_accounting.h.
#include "common/device/tensor_accounting.h"

#include <c10/core/CPUAllocator.h>

#include <malloc.h>
#include <algorithm>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <new>
#include <string>

#include "common/base/byte_size.h"
#include "common/device/device_memory.h"
#include "common/device/host_memory_guard.h"

namespace up {
namespace {

constexpr size_t kHeader = 64;  // keeps the data at LibTorch's 64-byte alignment

std::atomic<int64_t> g_live{0};
std::atomic<int64_t> g_peak{0};
std::atomic<bool> g_installed{false};
std::atomic<DeviceBudget*> g_budget{nullptr};
std::atomic<int64_t> g_refusals{0};
Refusal g_last_refusal;  // written before g_refusals is raised
std::mutex g_place_mutex;
std::string g_place;

// The header in front of each block: its size, and whether it was charged to
// the budget (so a block allocated before the budget was set is never uncharged).
struct BlockHeader {
  int64_t bytes;
  int64_t charged;
};
static_assert(sizeof(BlockHeader) <= kHeader);

[[noreturn]] void Refuse(int64_t requested, int64_t in_use, int64_t budget) {
  g_last_refusal = {requested, in_use, budget};
  g_refusals.fetch_add(1);
  TORCH_CHECK_WITH(OutOfMemoryError, false, "out of memory: tried to allocate ",
                   FormatBytes(requested), " on the CPU device with ", FormatBytes(in_use),
                   " of its ", FormatBytes(budget), " budget in use");
}

// Charges `bytes` to the budget, if there is one; throws when it refuses.
bool Charge(int64_t bytes) {
  DeviceBudget* budget = g_budget.load(std::memory_order_acquire);
  if (budget == nullptr) return false;
  int64_t in_use = 0;
  if (!budget->TryCharge(bytes, &in_use)) Refuse(bytes, in_use, budget->budget);
  return true;
}

void RaisePeak(int64_t live) {
  int64_t peak = g_peak.load(std::memory_order_relaxed);
  while (live > peak && !g_peak.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
  }
}

void Free(void* data) {
  if (data == nullptr) return;  // zero-byte tensors have no block
  char* base = static_cast<char*>(data) - kHeader;
  BlockHeader h;
  std::memcpy(&h, base, sizeof(h));
  g_live.fetch_sub(h.bytes, std::memory_order_relaxed);
  if (h.charged) {
    if (DeviceBudget* budget = g_budget.load(std::memory_order_acquire)) budget->Uncharge(h.bytes);
  }
  std::free(base);
}

class CountingCpuAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    if (n == 0) return {nullptr, nullptr, &Free, c10::Device(c10::DeviceType::CPU)};
    const int64_t bytes = static_cast<int64_t>(n);
    const bool charged = Charge(bytes);  // throws past the budget, before any allocation
    void* base = nullptr;
    if (posix_memalign(&base, kHeader, n + kHeader) != 0) {
      if (charged) g_budget.load()->Uncharge(bytes);
      TORCH_CHECK_WITH(OutOfMemoryError, false,
                       "DefaultCPUAllocator: can't allocate memory: "
                       "you tried to allocate ",
                       n, " bytes.");
    }
    const BlockHeader h{bytes, charged ? 1 : 0};
    std::memcpy(base, &h, sizeof(h));
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
    // ...and gives them back when the machine runs short (host_memory_guard.h).
    StartHostMemoryGuard();
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

void UseDeviceBudget(DeviceBudget* budget) { g_budget.store(budget, std::memory_order_release); }
DeviceBudget* CurrentDeviceBudget() { return g_budget.load(std::memory_order_acquire); }

std::optional<Refusal> LastRefusal() {
  if (g_refusals.load() == 0) return std::nullopt;
  return g_last_refusal;
}

void ChargeUnowned(int64_t bytes) {
  Charge(bytes);
  RaisePeak(g_live.fetch_add(bytes, std::memory_order_relaxed) + bytes);
}

void UnchargeUnowned(int64_t bytes) {
  g_live.fetch_sub(bytes, std::memory_order_relaxed);
  if (DeviceBudget* budget = g_budget.load(std::memory_order_acquire)) budget->Uncharge(bytes);
}

bool CountedByAccounting(const torch::Tensor& t) {
  return t.defined() && t.storage().data_ptr().get_deleter() == &Free;
}

torch::Tensor EmptyUncounted(at::IntArrayRef sizes, at::ScalarType dtype) {
  int64_t numel = 1;
  for (int64_t d : sizes) numel *= d;
  const size_t bytes = static_cast<size_t>(numel) * c10::elementSize(dtype);
  void* data = nullptr;
  if (bytes > 0 && posix_memalign(&data, kHeader, bytes) != 0) {
    TORCH_CHECK_WITH(OutOfMemoryError, false, "host buffer: can't allocate ", bytes, " bytes");
  }
  return torch::from_blob(
      data, sizes, [](void* p) { std::free(p); }, torch::TensorOptions().dtype(dtype));
}

torch::Tensor UncountedCopy(const torch::Tensor& t) {
  torch::Tensor buffer = EmptyUncounted(t.sizes(), t.scalar_type());  // (as t)
  buffer.copy_(t);
  return buffer;
}

void SetMemoryPlace(std::string place) {
  std::lock_guard<std::mutex> lock(g_place_mutex);
  g_place = std::move(place);
}

std::string MemoryPlace() {
  std::lock_guard<std::mutex> lock(g_place_mutex);
  return g_place;
}

TensorBytes TakeTensorBytes(const torch::Device& device) {
  const TensorBytes t = TensorBytesOn(device);
  ResetPeakTensorBytes(device);
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
