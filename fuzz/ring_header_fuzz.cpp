// Arbitrary bytes where a ring slot's header should be (a peer may write
// anything into shared memory): SlotHeaderProblem must describe what is wrong
// or accept, never read out of bounds or overflow. The run id, sequence number
// and the slot's payload size the reader expects come from the input too, so
// the fuzzer can reach the tensor table checks.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "ipc/ring_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace up::ipc;
  alignas(SlotHeader) unsigned char storage[sizeof(SlotHeader)] = {};
  std::memcpy(storage, data, size < sizeof(storage) ? size : sizeof(storage));
  const auto* header = reinterpret_cast<const SlotHeader*>(storage);
  uint64_t slot_payload_bytes = 1 << 20;
  if (size >= sizeof(storage) + 8) std::memcpy(&slot_payload_bytes, data + sizeof(storage), 8);
  const std::string problem =
      SlotHeaderProblem(*header, header->run_id, header->seq, slot_payload_bytes);
  if (problem.empty()) {
    // Accepted: every tensor must lie inside the payload.
    for (uint32_t i = 0; i < header->n_tensors; ++i) {
      const TensorEntry& t = header->tensors[i];
      if (t.offset > header->payload_bytes || t.bytes > header->payload_bytes - t.offset ||
          header->payload_bytes > slot_payload_bytes)
        __builtin_trap();
    }
  }
  return 0;
}
