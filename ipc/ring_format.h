// The on-segment layout of a shared-memory ring, shared by producer and consumer.
//
// A segment holds one RingControl at offset 0, then `slot_count` slots of
// `slot_stride` bytes each; a slot is a SlotHeader followed by its payload
// (aligned to kPayloadAlign). Everything here is fixed-size and standard-layout
// and holds offsets, never pointers, because the two processes map the segment
// at different addresses. The atomics are lock-free (checked below), hence
// address-free, so they synchronise across processes. Nothing here owns
// memory; ShmRing owns the segment and is the only code that writes these
// structs. TensorBytes and SlotHeaderProblem state the format's rules, used to
// validate what a peer wrote. All functions here are thread-safe.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

namespace up::ipc {

inline constexpr uint64_t kRingMagic = 0x474E495250495055ULL;  // "UPIPRING" little-endian
inline constexpr uint32_t kRingVersion = 1;
inline constexpr uint32_t kMaxTensors = 24;
inline constexpr uint32_t kMaxDims = 8;
inline constexpr uint32_t kNameBytes = 48;  // including the terminating NUL
inline constexpr uint64_t kPayloadAlign = 64;

enum class DType : uint8_t {
  kFloat32 = 1,
  kFloat16 = 2,
  kBFloat16 = 3,
  kFloat64 = 4,
  kInt64 = 5,
  kInt32 = 6,
  kUInt8 = 7
};

// True for the seven values above (a header read from shared memory may hold
// anything).
bool IsKnownDType(DType dtype);
// Bytes per element; throws UsageError for an unknown value.
size_t DTypeSize(DType dtype);

// Sets *bytes to numel * DTypeSize(dtype); false if the dtype is unknown, a
// dim is negative or the size overflows uint64_t.
bool TensorBytes(DType dtype, const int64_t* shape, size_t ndim, uint64_t* bytes);

enum class Direction : uint32_t { kForward = 1, kBackward = 2 };

struct TensorEntry {
  char name[kNameBytes];  // NUL-terminated
  DType dtype;
  uint8_t ndim;
  uint8_t pad[6];
  int64_t shape[kMaxDims];
  uint64_t offset;  // from the start of the slot's payload, multiple of kPayloadAlign
  uint64_t bytes;   // numel * DTypeSize(dtype)
};

struct RunId {
  uint8_t bytes[16];

  bool operator==(const RunId& other) const;
  bool operator!=(const RunId& other) const { return !(*this == other); }
  bool IsZero() const;
  // 32 lowercase hex digits.
  std::string Hex() const;
  // Reads /dev/urandom; throws RuntimeError if it cannot.
  static RunId Random();
  // Parses 32 hex digits (either case); throws UsageError otherwise.
  static RunId FromHex(const std::string& hex);
};

// At offset 0 of the segment. Written once by the creator (magic last, with
// release ordering), then only through the atomics.
struct alignas(64) RingControl {
  std::atomic<uint64_t> magic;  // kRingMagic once initialised
  uint32_t version;
  uint32_t pad0;
  RunId run_id;
  uint64_t slot_count;
  uint64_t slot_payload_bytes;
  uint64_t slot_stride;                           // bytes from one SlotHeader to the next
  alignas(64) std::atomic<uint64_t> head;         // messages committed (written by the producer)
  alignas(64) std::atomic<uint64_t> tail;         // contiguous prefix of slots released (consumer)
  alignas(64) std::atomic<uint32_t> aborted;      // 0: running, 1: reason being written, 2: aborted
  char abort_reason[128];                         // NUL-terminated; valid once aborted == 2
  alignas(64) std::atomic<int32_t> producer_pid;  // 0: none attached
  alignas(64) std::atomic<int32_t> consumer_pid;
};

// At the start of each slot; the payload follows at kSlotHeaderBytes.
struct alignas(64) SlotHeader {
  std::atomic<uint64_t> complete_seq;  // 0: nothing; seq + 1 once message `seq` is complete
  std::atomic<uint32_t> released;      // 1 once the consumer released it (tail not yet past)
  uint32_t pad0;
  uint64_t magic;
  uint32_t version;
  uint32_t pad1;
  RunId run_id;
  uint64_t seq;
  uint64_t step;
  uint32_t micro_batch;
  Direction direction;
  uint32_t n_tensors;
  uint32_t pad2;
  uint64_t payload_bytes;
  TensorEntry tensors[kMaxTensors];
};

// Empty if the header of the slot holding message `seq` is well formed: magic,
// version, run id, seq, direction, counts, and every tensor entry (NUL-
// terminated name, known dtype, consistent ndim/shape/bytes, 64-aligned offset
// inside payload_bytes <= slot_payload_bytes). Otherwise "<field> is <value>,
// expected <what>".
std::string SlotHeaderProblem(const SlotHeader& h, const RunId& run_id, uint64_t seq,
                              uint64_t slot_payload_bytes);

inline constexpr uint64_t kSlotHeaderBytes =
    (sizeof(SlotHeader) + kPayloadAlign - 1) / kPayloadAlign * kPayloadAlign;

static_assert(std::atomic<uint64_t>::is_always_lock_free, "ring needs lock-free 64-bit atomics");
static_assert(std::atomic<uint32_t>::is_always_lock_free, "ring needs lock-free 32-bit atomics");
static_assert(std::atomic<int32_t>::is_always_lock_free, "ring needs lock-free 32-bit atomics");
static_assert(sizeof(std::atomic<uint64_t>) == 8 && sizeof(std::atomic<uint32_t>) == 4);
static_assert(std::is_standard_layout_v<TensorEntry> && std::is_trivially_copyable_v<TensorEntry>);
static_assert(sizeof(TensorEntry) == 136 && alignof(TensorEntry) == 8);
static_assert(sizeof(RunId) == 16 && std::is_trivially_copyable_v<RunId>);
static_assert(std::is_standard_layout_v<RingControl> && std::is_standard_layout_v<SlotHeader>);
static_assert(offsetof(RingControl, head) % 64 == 0 && offsetof(RingControl, tail) % 64 == 0);
static_assert(offsetof(RingControl, aborted) % 64 == 0);
static_assert(offsetof(RingControl, producer_pid) % 64 == 0);
static_assert(offsetof(RingControl, consumer_pid) % 64 == 0);
static_assert(sizeof(RingControl) == 512 && alignof(RingControl) == 64);
static_assert(offsetof(SlotHeader, tensors) == 88);
static_assert(sizeof(SlotHeader) == 3392 && kSlotHeaderBytes % kPayloadAlign == 0);

}  // namespace up::ipc
