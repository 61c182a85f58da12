// Keeping freed blocks must never cost a run its life.
//
// Every process keeps the tensor blocks it frees (tensor_accounting.h raises
// glibc's mmap and trim thresholds), so a step does not fault its tensors in
// again: at a full BraTS patch that is about a third of the step. The price is
// host memory: each process holds its own peak's worth of blocks, and two
// stages taking turns on a CPU, each with its peak kept while the other
// computes, can pass what the machine has; the kernel's out-of-memory killer
// then takes a stage. The guard watches the machine's available memory from a
// thread of its own and, when it falls under a floor, gives this process's
// free blocks back (malloc_trim): kept while there is room, returned before
// the kernel has to take them. Torch-free.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace up {

// /proc/meminfo's MemTotal and MemAvailable, in bytes.
struct HostMemory {
  int64_t total = 0;
  int64_t available = 0;
};

// Reads `path` (meminfo's format); nullopt when it has no MemTotal or
// MemAvailable line.
std::optional<HostMemory> ReadHostMemory(const std::string& path = "/proc/meminfo");

// Below how many available bytes the guard gives blocks back on a machine of
// `total` bytes: an eighth of it, at least 1 GiB, at most 8 GiB.
// UP_HOST_TRIM_BELOW (a byte size, e.g. 4GiB) sets it instead.
int64_t TrimFloorBytes(int64_t total);

// One look: when `memory.available` is under `floor`, returns this process's
// free heap blocks to the kernel and says so (true).
bool TrimIfShort(const HostMemory& memory, int64_t floor);

// Starts the watching thread once per process (later calls do nothing): every
// 100 ms it reads /proc/meminfo and trims when short. Where /proc/meminfo
// cannot be read it does not start.
void StartHostMemoryGuard();

// How many times this process gave its blocks back (for summaries and tests).
int64_t HostMemoryTrims();

}  // namespace up
