// ShmRing: a single-producer/single-consumer ring of fixed-size slots in one
// shared-memory segment, moving one message (a few tensors' bytes) per slot.
//
// Protocol (layout in ring_format.h): the producer writes the payload of slot
// `seq % slots`, then the header, then `complete_seq = seq + 1` and
// `head = seq + 1`, both with release ordering. The consumer trusts only
// `head` and `complete_seq` (acquire), so a write that was begun but never
// committed (the producer died or threw) is never seen. Release() may come in
// any order; `tail` advances over the contiguous released prefix, which frees
// those slots for the producer. No lock is taken anywhere: a peer that dies
// cannot block the other; waiters notice it via its recorded pid, the abort
// flag, or their deadline.
//
// Ownership: the ShmRing made by Create() owns the segment name and removes it
// when destroyed; Open() never removes. Thread-safety: one thread may act as
// producer and one (other) thread as consumer on the same or different
// ShmRing objects, in any processes; Abort() and aborted() may be called from
// any thread. Everything else is not thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ipc/ring_format.h"
#include "ipc/shm_segment.h"

namespace up::ipc {

struct RingOptions {
  std::string name;  // segment name, [A-Za-z0-9._-]{1,200}
  RunId run_id;      // must not be all zero
  uint32_t slots = 0;
  uint64_t slot_payload_bytes = 0;  // rounded up to kPayloadAlign
  // The payload lives elsewhere (a CUDA IPC device slab of the same layout):
  // slots hold headers only, and the tensor tables' offsets point into it.
  bool external_payload = false;
};

struct TensorSpec {
  std::string name;  // at most kNameBytes - 1 characters
  DType dtype;
  std::vector<int64_t> shape;  // bytes = numel * DTypeSize(dtype)
};

struct MessageMeta {
  uint64_t step = 0;
  uint32_t micro_batch = 0;
  Direction direction = Direction::kForward;
};

struct WriteSlot {
  uint64_t seq;
  MessageMeta meta;
  std::vector<void*> tensor_data;  // one per spec, into the slot's payload (null if external)
  std::vector<uint64_t> offsets;   // one per spec, from the start of the slot's payload
};

struct ReadSlot {
  uint64_t seq;
  MessageMeta meta;
  std::vector<TensorEntry> tensors;      // a validated copy of the header's table
  std::vector<const void*> tensor_data;  // valid until Release(*this)
};

class ShmRing {
 public:
  using Deadline = std::chrono::steady_clock::time_point;

  // Creates and initialises the segment. Throws UsageError for bad options,
  // RuntimeError if the segment exists or cannot be made.
  static std::unique_ptr<ShmRing> Create(const RingOptions& options);
  // Opens a ring made by Create(); throws RuntimeError naming the mismatch
  // (magic, version, run id, sizes) or the missing segment.
  static std::unique_ptr<ShmRing> Open(const std::string& name, const RunId& expected);
  // Payload bytes a message with these tensors needs (each tensor starts on a
  // kPayloadAlign boundary). Throws UsageError for specs no slot can carry
  // (count, name length, ndim, dtype, negative dim, size overflow).
  static uint64_t PayloadBytesFor(const std::vector<TensorSpec>& specs);

  ShmRing(const ShmRing&) = delete;
  ShmRing& operator=(const ShmRing&) = delete;
  ~ShmRing() = default;  // unmaps; removes the segment if made by Create()

  // Record getpid() as this side so the peer notices if this process dies.
  // Throws RuntimeError if another live process holds that side.
  void AttachAsProducer();
  void AttachAsConsumer();

  // Producer: validates `specs` against the limits and the slot size (UsageError
  // naming the sizes) before waiting or writing anything, then waits for a free
  // slot. A second BeginWrite before Commit abandons the first (same seq).
  WriteSlot BeginWrite(const MessageMeta& meta, const std::vector<TensorSpec>& specs,
                       Deadline deadline);
  // Publishes the slot of the last BeginWrite. UsageError for any other slot.
  void Commit(const WriteSlot& slot);

  // Consumer: the next message in order. A corrupt header throws RuntimeError
  // naming the field; an uncommitted write is never returned.
  ReadSlot Receive(Deadline deadline);
  // Gives the slot back; any order. UsageError if not received or released twice.
  void Release(const ReadSlot& slot);

  // Every waiter on either side, in any process, throws PeerGoneError(reason),
  // and so does every later BeginWrite/Receive. The first reason wins.
  void Abort(const std::string& reason);
  bool aborted() const;

  void* base() { return segment_.data(); }
  size_t mapped_bytes() const { return segment_.size(); }
  uint32_t slots() const { return slot_count_; }
  uint64_t slot_payload_bytes() const { return slot_payload_bytes_; }
  bool external_payload() const { return slot_stride_ == kSlotHeaderBytes; }
  const std::string& name() const { return segment_.name(); }
  // Messages committed / contiguous slots released (for tests and stats).
  uint64_t head() const;
  uint64_t tail() const;

 private:
  explicit ShmRing(ShmSegment segment);
  RingControl& control();
  const RingControl& control() const;
  SlotHeader& slot_header(uint64_t seq);
  unsigned char* slot_payload(uint64_t seq);
  void Attach(bool producer);
  std::string AbortReason() const;
  template <typename Ready>
  void WaitUntil(Ready ready, const char* what, bool peer_is_consumer, Deadline deadline);

  ShmSegment segment_;
  uint32_t slot_count_ = 0;
  uint64_t slot_payload_bytes_ = 0;
  uint64_t slot_stride_ = 0;
  // Producer side.
  uint64_t write_seq_ = 0;  // next seq to write (== head)
  bool write_pending_ = false;
  uint32_t pending_n_ = 0;
  uint64_t pending_payload_bytes_ = 0;
  TensorEntry pending_[kMaxTensors];
  // Consumer side.
  uint64_t read_seq_ = 0;  // next seq to receive
};

}  // namespace up::ipc
