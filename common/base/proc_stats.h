// Process resource figures read from the kernel.
#pragma once

#include <sys/types.h>
#include <cstdint>

namespace up {

// Peak resident set size of this process, in bytes (getrusage ru_maxrss).
int64_t PeakRssBytes();

// Current resident set size, in bytes (/proc/self/statm); 0 if unknown.
int64_t CurrentRssBytes();

}  // namespace up
