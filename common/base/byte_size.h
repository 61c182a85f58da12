// Sizes in bytes as people write them ("16GiB", "1.5GB", "17179869184") and
// as the tools print them ("12.3 GiB"). Torch-free.
#pragma once

#include <cstdint>
#include <string>

namespace up {

// "16GiB", "16 GiB", "12000MiB", "1.5GB", "17179869184" -> bytes. Throws
// UsageError naming `what` (the option or key) for anything else or <= 0.
int64_t ParseByteSize(const std::string& text, const std::string& what);

std::string FormatBytes(int64_t bytes);  // "12.3 GiB", "512 MiB"

}  // namespace up
