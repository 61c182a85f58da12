// ShmRing implementation (see shm_ring.h for the protocol and the rules on
// ownership and threads). Lock-free: the only shared writes are plain header
// fields published by release stores to complete_seq/head (producer) and
// tail (consumer), and the abort flag.
#include "ipc/shm_ring.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <new>
#include <thread>

#include "common/base/errors.h"

namespace up::ipc {
namespace {

using std::chrono::steady_clock;

constexpr uint32_t kMaxSlots = 1u << 16;
constexpr uint64_t kMaxSegmentBytes = uint64_t{1} << 44;  // 16 TiB: far above any /dev/shm
constexpr int kSpinIterations = 256;
constexpr int kYieldIterations = 64;
constexpr auto kMaxSleep = std::chrono::microseconds(128);
constexpr auto kPeerCheckInterval = std::chrono::milliseconds(1);

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

uint64_t AlignUp(uint64_t v) { return (v + kPayloadAlign - 1) / kPayloadAlign * kPayloadAlign; }

// False once `pid` has exited: no such process, or a zombie not yet reaped.
bool ProcessAlive(int32_t pid) {
  if (::kill(pid, 0) == -1 && errno == ESRCH) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;  // cannot tell: assume alive
  // "pid (comm) S ...": the state follows the last ')'.
  const size_t paren = line.rfind(')');
  if (paren == std::string::npos || paren + 2 >= line.size()) return true;
  return line[paren + 2] != 'Z' && line[paren + 2] != 'X';
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

// Validates `specs` and lays them out in `entries`; returns the payload bytes.
uint64_t LayoutTensors(const std::vector<TensorSpec>& specs, TensorEntry* entries) {
  if (specs.size() > kMaxTensors) {
    throw UsageError("message has " + std::to_string(specs.size()) +
                     " tensors; a ring slot holds " + "at most " + std::to_string(kMaxTensors) +
                     "; send fewer per message");
  }
  uint64_t offset = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    const TensorSpec& s = specs[i];
    const std::string what = "tensor " + std::to_string(i) + " '" + s.name + "'";
    if (s.name.empty() || s.name.size() >= kNameBytes || s.name.find('\0') != std::string::npos) {
      throw UsageError(what + " has a name of " + std::to_string(s.name.size()) +
                       " bytes; use 1 to " + std::to_string(kNameBytes - 1) + " bytes, no NUL");
    }
    if (s.shape.size() > kMaxDims) {
      throw UsageError(what + " has " + std::to_string(s.shape.size()) + " dims; at most " +
                       std::to_string(kMaxDims) + " are supported; reshape it first");
    }
    uint64_t bytes = 0;
    if (!TensorBytes(s.dtype, s.shape.data(), s.shape.size(), &bytes) || bytes > kMaxSegmentBytes) {
      throw UsageError(what + " has dtype code " + std::to_string(static_cast<int>(s.dtype)) +
                       " and shape " + ShapeText(s.shape) +
                       ": an unknown dtype, a negative dim or too large to send; check them");
    }
    TensorEntry& e = entries[i];
    std::memset(&e, 0, sizeof(e));
    std::memcpy(e.name, s.name.data(), s.name.size());
    e.dtype = s.dtype;
    e.ndim = static_cast<uint8_t>(s.shape.size());
    std::copy(s.shape.begin(), s.shape.end(), e.shape);
    e.offset = offset;
    e.bytes = bytes;
    offset += AlignUp(bytes);
    if (offset > kMaxSegmentBytes) {
      throw UsageError("message payload exceeds " + std::to_string(kMaxSegmentBytes) +
                       " bytes at " + what + "; send less per message");
    }
  }
  return offset;
}

}  // namespace

std::unique_ptr<ShmRing> ShmRing::Create(const RingOptions& o) {
  ShmSegment::ValidateName(o.name);
  if (o.run_id.IsZero()) {
    throw UsageError("ring '" + o.name + "' given an all-zero run id; use RunId::Random()");
  }
  if (o.slots < 1 || o.slots > kMaxSlots || o.slot_payload_bytes == 0 ||
      o.slot_payload_bytes > kMaxSegmentBytes / o.slots) {
    throw UsageError("ring '" + o.name + "' asked for " + std::to_string(o.slots) + " slots of " +
                     std::to_string(o.slot_payload_bytes) + " payload bytes; use 1 to " +
                     std::to_string(kMaxSlots) + " slots of > 0 bytes, at most " +
                     std::to_string(kMaxSegmentBytes) + " bytes in all");
  }
  const uint64_t payload = AlignUp(o.slot_payload_bytes);
  const uint64_t stride = kSlotHeaderBytes + (o.external_payload ? 0 : payload);
  const uint64_t total = sizeof(RingControl) + stride * o.slots;
  auto ring = std::unique_ptr<ShmRing>(new ShmRing(ShmSegment::Create(o.name, total)));

  auto* ctl = new (ring->base()) RingControl();
  ctl->version = kRingVersion;
  ctl->run_id = o.run_id;
  ctl->slot_count = o.slots;
  ctl->slot_payload_bytes = payload;
  ctl->slot_stride = stride;
  ring->slot_count_ = o.slots;
  ring->slot_payload_bytes_ = payload;
  ring->slot_stride_ = stride;
  for (uint64_t i = 0; i < o.slots; ++i) new (&ring->slot_header(i)) SlotHeader();
  ctl->magic.store(kRingMagic, std::memory_order_release);  // last: the ring is ready
  return ring;
}

std::unique_ptr<ShmRing> ShmRing::Open(const std::string& name, const RunId& expected) {
  ShmSegment seg = ShmSegment::Open(name);
  const std::string where = "shared memory ring '" + name + "'";
  if (seg.size() < sizeof(RingControl)) {
    throw RuntimeError(where + " is " + std::to_string(seg.size()) + " bytes, smaller than its " +
                       "control block; it is not a ring of this program (remove /dev/shm/" + name +
                       ")");
  }
  const auto& ctl = *static_cast<const RingControl*>(seg.data());
  const uint64_t magic = ctl.magic.load(std::memory_order_acquire);
  if (magic != kRingMagic) {
    throw RuntimeError(where + " has magic " + std::to_string(magic) + ", expected " +
                       std::to_string(kRingMagic) +
                       "; it is not initialised yet or not a ring: retry, or check the name");
  }
  if (ctl.version != kRingVersion) {
    throw RuntimeError(where + " has layout version " + std::to_string(ctl.version) +
                       ", this program speaks " + std::to_string(kRingVersion) +
                       "; run the same build in every process");
  }
  if (ctl.run_id != expected) {
    throw RuntimeError(where + " belongs to run " + ctl.run_id.Hex() + ", expected run " +
                       expected.Hex() + "; it is a leftover of another run: remove /dev/shm/" +
                       name + " or pass the right run id");
  }
  const uint64_t count = ctl.slot_count;
  const uint64_t payload = ctl.slot_payload_bytes;
  const bool sizes_ok =
      count >= 1 && count <= kMaxSlots && payload % kPayloadAlign == 0 &&
      payload <= kMaxSegmentBytes &&
      (ctl.slot_stride == kSlotHeaderBytes + payload || ctl.slot_stride == kSlotHeaderBytes) &&
      seg.size() >= sizeof(RingControl) + count * ctl.slot_stride;
  if (!sizes_ok) {
    throw RuntimeError(where + " has inconsistent sizes: slot_count " + std::to_string(count) +
                       ", slot_payload_bytes " + std::to_string(payload) + ", slot_stride " +
                       std::to_string(ctl.slot_stride) + ", segment " + std::to_string(seg.size()) +
                       " bytes; it is corrupt: remove it");
  }
  auto ring = std::unique_ptr<ShmRing>(new ShmRing(std::move(seg)));
  ring->slot_count_ = static_cast<uint32_t>(count);
  ring->slot_payload_bytes_ = payload;
  ring->slot_stride_ = ctl.slot_stride;
  ring->write_seq_ = ctl.head.load(std::memory_order_acquire);
  ring->read_seq_ = ctl.tail.load(std::memory_order_acquire);
  return ring;
}

uint64_t ShmRing::PayloadBytesFor(const std::vector<TensorSpec>& specs) {
  TensorEntry entries[kMaxTensors];
  return LayoutTensors(specs, entries);
}

ShmRing::ShmRing(ShmSegment segment) : segment_(std::move(segment)) {}

RingControl& ShmRing::control() { return *static_cast<RingControl*>(segment_.data()); }
const RingControl& ShmRing::control() const {
  return *static_cast<const RingControl*>(segment_.data());
}
SlotHeader& ShmRing::slot_header(uint64_t seq) {
  auto* base = static_cast<unsigned char*>(segment_.data());
  return *reinterpret_cast<SlotHeader*>(base + sizeof(RingControl) +
                                        (seq % slot_count_) * slot_stride_);
}
unsigned char* ShmRing::slot_payload(uint64_t seq) {
  return reinterpret_cast<unsigned char*>(&slot_header(seq)) + kSlotHeaderBytes;
}
uint64_t ShmRing::head() const { return control().head.load(std::memory_order_acquire); }
uint64_t ShmRing::tail() const { return control().tail.load(std::memory_order_acquire); }

void ShmRing::AttachAsProducer() { Attach(/*producer=*/true); }
void ShmRing::AttachAsConsumer() { Attach(/*producer=*/false); }

void ShmRing::Attach(bool producer) {
  const int32_t me = ::getpid();
  auto& field = producer ? control().producer_pid : control().consumer_pid;
  const char* side = producer ? "producer" : "consumer";
  const int32_t old = field.load(std::memory_order_acquire);
  if (old != 0 && old != me && ProcessAlive(old)) {
    throw RuntimeError("ring '" + name() + "' already has " + side + " process " +
                       std::to_string(old) + ", still alive; only one " + side + " may attach");
  }
  field.store(me, std::memory_order_release);
  if (producer) {
    write_seq_ = head();
    write_pending_ = false;
  } else {
    read_seq_ = tail();  // messages received by a dead consumer but not released come again
  }
}

void ShmRing::Abort(const std::string& reason) {
  RingControl& ctl = control();
  uint32_t expected = 0;
  if (!ctl.aborted.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) return;
  const size_t n = std::min(reason.size(), sizeof(ctl.abort_reason) - 1);
  std::memcpy(ctl.abort_reason, reason.data(), n);
  ctl.abort_reason[n] = '\0';
  ctl.aborted.store(2, std::memory_order_release);
}

bool ShmRing::aborted() const { return control().aborted.load(std::memory_order_acquire) != 0; }

std::string ShmRing::AbortReason() const {
  const RingControl& ctl = control();
  const auto give_up = steady_clock::now() + std::chrono::milliseconds(10);
  while (ctl.aborted.load(std::memory_order_acquire) == 1 && steady_clock::now() < give_up) {
    std::this_thread::yield();
  }
  std::string reason = "(no reason recorded)";
  if (ctl.aborted.load(std::memory_order_acquire) == 2) {
    reason.assign(ctl.abort_reason, strnlen(ctl.abort_reason, sizeof(ctl.abort_reason)));
  }
  return "ring '" + name() + "' was aborted: " + reason;
}

template <typename Ready>
void ShmRing::WaitUntil(Ready ready, const char* what, bool peer_is_consumer, Deadline deadline) {
  const RingControl& ctl = control();
  if (ctl.aborted.load(std::memory_order_acquire) != 0) throw PeerGoneError(AbortReason());
  if (ready()) return;
  const auto start = steady_clock::now();
  auto next_peer_check = start;
  auto sleep = std::chrono::microseconds(1);
  for (uint64_t i = 0;; ++i) {
    if (i < kSpinIterations) {
      CpuRelax();
    } else if (i < kSpinIterations + kYieldIterations) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(sleep);
      sleep = std::min(sleep * 2, kMaxSleep);
    }
    if (ready()) return;
    if (ctl.aborted.load(std::memory_order_acquire) != 0) throw PeerGoneError(AbortReason());
    if (i < kSpinIterations && i % 64 != 0) continue;  // keep the spin phase cheap
    const auto now = steady_clock::now();
    if (now >= next_peer_check) {
      next_peer_check = now + kPeerCheckInterval;
      const auto& pid_field = peer_is_consumer ? ctl.consumer_pid : ctl.producer_pid;
      const int32_t pid = pid_field.load(std::memory_order_acquire);
      if (pid != 0 && !ProcessAlive(pid)) {
        if (ready()) return;  // it finished its part before dying
        throw PeerGoneError("ring '" + name() +
                            "': " + (peer_is_consumer ? "consumer" : "producer") + " process " +
                            std::to_string(pid) + " is gone while waiting for " + what +
                            "; see that process's log, then restart the run");
      }
    }
    if (now >= deadline) {
      if (ready()) return;
      const auto waited =
          std::chrono::duration_cast<std::chrono::milliseconds>(now - start).count();
      throw TimeoutError("ring '" + name() + "': timed out after " + std::to_string(waited) +
                         " ms waiting for " + what + " (head " + std::to_string(head()) +
                         ", tail " + std::to_string(tail()) + ", " + std::to_string(slot_count_) +
                         " slots); the peer is alive but stalled: check it or raise the timeout");
    }
  }
}

WriteSlot ShmRing::BeginWrite(const MessageMeta& meta, const std::vector<TensorSpec>& specs,
                              Deadline deadline) {
  TensorEntry entries[kMaxTensors];
  const uint64_t payload = LayoutTensors(specs, entries);
  if (payload > slot_payload_bytes_) {
    throw UsageError("message for ring '" + name() + "' needs " + std::to_string(payload) +
                     " payload bytes (" + std::to_string(specs.size()) +
                     " tensors, each 64-byte aligned) but a slot holds " +
                     std::to_string(slot_payload_bytes_) +
                     "; create the ring with slot_payload_bytes >= " + std::to_string(payload));
  }
  if (meta.direction != Direction::kForward && meta.direction != Direction::kBackward) {
    throw UsageError("message direction " + std::to_string(static_cast<uint32_t>(meta.direction)) +
                     " is invalid; use Direction::kForward or kBackward");
  }
  write_pending_ = false;  // abandons an uncommitted earlier write: it was never published
  const uint64_t seq = write_seq_;
  RingControl& ctl = control();
  WaitUntil([&] { return seq < ctl.tail.load(std::memory_order_acquire) + slot_count_; },
            "a free slot", /*peer_is_consumer=*/true, deadline);
  std::copy(entries, entries + specs.size(), pending_);
  pending_n_ = static_cast<uint32_t>(specs.size());
  pending_payload_bytes_ = payload;
  write_pending_ = true;
  WriteSlot slot{seq, meta, {}, {}};
  unsigned char* data = slot_payload(seq);
  slot.tensor_data.reserve(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    slot.tensor_data.push_back(external_payload() ? nullptr : data + entries[i].offset);
    slot.offsets.push_back(entries[i].offset);
  }
  return slot;
}

void ShmRing::Commit(const WriteSlot& slot) {
  if (!write_pending_ || slot.seq != write_seq_) {
    throw UsageError("Commit of ring '" + name() + "' message " + std::to_string(slot.seq) +
                     ", but the open write is " +
                     (write_pending_ ? std::to_string(write_seq_) : std::string("none")) +
                     "; commit only the slot of the latest BeginWrite, once");
  }
  SlotHeader& h = slot_header(slot.seq);
  h.magic = kRingMagic;
  h.version = kRingVersion;
  h.run_id = control().run_id;
  h.seq = slot.seq;
  h.step = slot.meta.step;
  h.micro_batch = slot.meta.micro_batch;
  h.direction = slot.meta.direction;
  h.n_tensors = pending_n_;
  h.payload_bytes = pending_payload_bytes_;
  std::copy(pending_, pending_ + pending_n_, h.tensors);
  h.complete_seq.store(slot.seq + 1, std::memory_order_release);
  control().head.store(slot.seq + 1, std::memory_order_release);
  write_pending_ = false;
  ++write_seq_;
}

ReadSlot ShmRing::Receive(Deadline deadline) {
  const uint64_t seq = read_seq_;
  const RingControl& ctl = control();
  WaitUntil([&] { return ctl.head.load(std::memory_order_acquire) > seq; }, "the next message",
            /*peer_is_consumer=*/false, deadline);
  const SlotHeader& h = slot_header(seq);
  const uint64_t complete = h.complete_seq.load(std::memory_order_acquire);
  if (complete != seq + 1) {
    throw RuntimeError("ring '" + name() + "' slot " + std::to_string(seq % slot_count_) +
                       ": complete_seq is " + std::to_string(complete) + ", expected " +
                       std::to_string(seq + 1) + " for message " + std::to_string(seq) +
                       "; the segment is corrupt or shared by two producers: restart the run");
  }
  const std::string problem = SlotHeaderProblem(h, control().run_id, seq, slot_payload_bytes_);
  if (!problem.empty()) {
    throw RuntimeError("ring '" + name() + "' message " + std::to_string(seq) + ": header " +
                       problem + "; the segment is corrupt or from another build: restart the run");
  }
  ReadSlot out{seq, MessageMeta{h.step, h.micro_batch, h.direction}, {}, {}};
  const uint32_t n = std::min(h.n_tensors, kMaxTensors);  // checked above; min keeps it safe
  out.tensors.assign(h.tensors, h.tensors + n);
  for (const TensorEntry& e : out.tensors) {
    out.tensor_data.push_back(external_payload() ? nullptr : slot_payload(seq) + e.offset);
  }
  ++read_seq_;
  return out;
}

void ShmRing::Release(const ReadSlot& slot) {
  RingControl& ctl = control();
  uint64_t tail = ctl.tail.load(std::memory_order_relaxed);  // only the consumer writes it
  if (slot.seq < tail || slot.seq >= read_seq_ ||
      slot_header(slot.seq).released.load(std::memory_order_relaxed) != 0) {
    throw UsageError("Release of ring '" + name() + "' message " + std::to_string(slot.seq) +
                     ", which is not received or was released already (received up to " +
                     std::to_string(read_seq_) + ", released below " + std::to_string(tail) +
                     "); release each received slot once");
  }
  slot_header(slot.seq).released.store(1, std::memory_order_relaxed);
  const uint64_t old_tail = tail;
  while (tail < read_seq_) {
    SlotHeader& h = slot_header(tail);
    if (h.released.load(std::memory_order_relaxed) == 0) break;
    h.released.store(0, std::memory_order_relaxed);
    h.complete_seq.store(0, std::memory_order_relaxed);
    ++tail;
  }
  // Release ordering: our reads of the payload and the resets above happen
  // before the producer reuses these slots.
  if (tail != old_tail) ctl.tail.store(tail, std::memory_order_release);
}

}  // namespace up::ipc
