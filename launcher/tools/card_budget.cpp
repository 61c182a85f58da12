// See card_budget.h.
#include "launcher/tools/card_budget.h"

#include <cmath>
#include <string>

#include "common/base/byte_size.h"
#include "common/base/errors.h"

namespace up {
namespace {

std::string Trimmed(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

UsageError BadHeadroom(const std::string& text) {
  return UsageError("--headroom = " + text +
                    ": expected a percentage of --gpu-mem from 0% to under 100% (like 10%) or a "
                    "size (like 1.5GiB)");
}

// "10%" -> 10; BadHeadroom for anything but a number in [0, 100) and '%'.
double ParsePercent(const std::string& text, const std::string& given) {
  const std::string number = Trimmed(text.substr(0, text.size() - 1));
  double percent = -1;
  try {
    size_t used = 0;
    percent = std::stod(number, &used);
    if (used != number.size()) throw BadHeadroom(given);
  } catch (const std::exception&) {
    throw BadHeadroom(given);
  }
  if (!std::isfinite(percent) || percent < 0 || percent >= 100) throw BadHeadroom(given);
  return percent;
}

int64_t HeadroomBytes(const std::string& given, int64_t card_bytes) {
  const std::string text = Trimmed(given);
  if (text.empty()) throw BadHeadroom(given);
  if (text.back() == '%') {
    return std::llround(static_cast<double>(card_bytes) * ParsePercent(text, given) / 100.0);
  }
  if (text == "0") return 0;
  try {
    return ParseByteSize(text, "--headroom");
  } catch (const UsageError&) {
    throw BadHeadroom(given);
  }
}

}  // namespace

CardBudget ParseCardBudget(const std::string& gpu_mem, const std::string& headroom) {
  CardBudget out;
  out.card_bytes = ParseByteSize(gpu_mem, "--gpu-mem");
  out.headroom_bytes = HeadroomBytes(headroom, out.card_bytes);
  out.headroom_text = Trimmed(headroom);
  if (out.usable_bytes() <= 0) {
    throw UsageError("--headroom = " + headroom + " leaves nothing of --gpu-mem " + gpu_mem + " (" +
                     FormatBytes(out.card_bytes) +
                     "): give less headroom (like 10%) or a larger --gpu-mem");
  }
  return out;
}

int64_t AllocatorReserveBytes(int64_t tensor_bytes) {
  if (tensor_bytes <= 0) return 0;
  return static_cast<int64_t>(
      std::ceil(static_cast<double>(tensor_bytes) * kAllocatorReserveFraction));
}

CardNeed NeedOnCard(int64_t tensor_bytes, int processes) {
  CardNeed need;
  need.tensor_bytes = tensor_bytes;
  need.reserve_bytes = AllocatorReserveBytes(tensor_bytes);
  need.workspace_bytes = processes * kWorkspaceAllowanceBytes;
  need.context_bytes = processes * kContextAllowanceBytes;
  return need;
}

std::string NeedText(const CardNeed& need) {
  const int64_t processes = need.context_bytes / kContextAllowanceBytes;
  return FormatBytes(need.total()) + " (" + FormatBytes(need.tensor_bytes) + " tensors + " +
         FormatBytes(need.reserve_bytes) + " allocator reserve + " +
         FormatBytes(need.workspace_bytes) + " workspace + " + FormatBytes(need.context_bytes) +
         (processes == 1 ? " context)"
                         : " contexts of " + std::to_string(processes) + " processes)");
}

}  // namespace up
