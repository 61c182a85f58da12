// Tests for ShmSegment and ShmRing: message round trips, wraparound across
// threads and processes, full/empty timeouts, oversize and torn writes,
// forged headers, out-of-order release, abort, dead peers, cleanup and
// permissions.
//
// Every test uses its own segment name (pid + random suffix) and checks that
// nothing is left in /dev/shm; a NameGuard removes leftovers if a test fails
// midway. Forked children only Open() rings and leave with _exit().
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/base/errors.h"
#include "ipc/ring_format.h"
#include "ipc/shm_ring.h"
#include "ipc/shm_segment.h"

namespace up::ipc {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

std::string UniqueName(const std::string& tag) {
  return "up_test_" + tag + "_" + std::to_string(::getpid()) + "_" +
         RunId::Random().Hex().substr(0, 12);
}

bool ShmFileExists(const std::string& name) {
  struct stat st;
  return ::stat(("/dev/shm/" + name).c_str(), &st) == 0;
}

// Removes the segment if a failing test left it behind.
struct NameGuard {
  std::string name;
  ~NameGuard() {
    if (ShmSegment::Exists(name)) ShmSegment::Remove(name);
  }
};

steady_clock::time_point In(int ms) { return steady_clock::now() + milliseconds(ms); }

double MsSince(steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(steady_clock::now() - t).count();
}

uint64_t SpecBytes(const TensorSpec& s) {
  uint64_t n = DTypeSize(s.dtype);
  for (int64_t d : s.shape) n *= static_cast<uint64_t>(d);
  return n;
}

uint8_t Pattern(uint64_t seed, uint64_t i) { return static_cast<uint8_t>(seed * 131 + i * 7 + 1); }

void Fill(void* p, uint64_t bytes, uint64_t seed) {
  auto* b = static_cast<uint8_t*>(p);
  for (uint64_t i = 0; i < bytes; ++i) b[i] = Pattern(seed, i);
}

bool Matches(const void* p, uint64_t bytes, uint64_t seed) {
  const auto* b = static_cast<const uint8_t*>(p);
  for (uint64_t i = 0; i < bytes; ++i) {
    if (b[i] != Pattern(seed, i)) return false;
  }
  return true;
}

// Specs whose sizes vary with `step`, so wraparound moves different layouts.
std::vector<TensorSpec> VaryingSpecs(uint64_t step) {
  return {{"act", DType::kFloat32, {2, static_cast<int64_t>(step % 17 + 1)}},
          {"skip", DType::kUInt8, {static_cast<int64_t>(step % 61)}}};
}

// Writes one message whose tensor i holds Pattern(step * 100 + i, ...).
uint64_t Send(ShmRing& ring, uint64_t step, const std::vector<TensorSpec>& specs,
              steady_clock::time_point deadline) {
  WriteSlot ws = ring.BeginWrite({step, static_cast<uint32_t>(step % 4), Direction::kForward},
                                 specs, deadline);
  for (size_t i = 0; i < specs.size(); ++i)
    Fill(ws.tensor_data[i], SpecBytes(specs[i]), step * 100 + i);
  ring.Commit(ws);
  return ws.seq;
}

// Receives one message and checks it against Send(step, specs); returns "" or a problem.
std::string ReceiveAndCheck(ShmRing& ring, uint64_t expect_seq, uint64_t step,
                            const std::vector<TensorSpec>& specs) {
  ReadSlot rs = ring.Receive(In(10000));
  std::string problem;
  if (rs.seq != expect_seq) problem = "seq " + std::to_string(rs.seq);
  if (rs.meta.step != step || rs.meta.micro_batch != step % 4) problem = "meta";
  if (rs.tensors.size() != specs.size()) problem = "tensor count";
  for (size_t i = 0; problem.empty() && i < specs.size(); ++i) {
    if (rs.tensors[i].bytes != SpecBytes(specs[i]) || rs.tensors[i].offset % kPayloadAlign != 0 ||
        !Matches(rs.tensor_data[i], rs.tensors[i].bytes, step * 100 + i)) {
      problem = "tensor " + std::to_string(i) + " of step " + std::to_string(step);
    }
  }
  ring.Release(rs);
  return problem;
}

// Runs `body` in a forked child; the child exits 0 on success, 1 on an exception.
template <typename Body>
pid_t ForkChild(Body body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    try {
      body();
      ::_exit(0);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child %d: %s\n", static_cast<int>(::getpid()), e.what());
      ::_exit(1);
    } catch (...) {
      ::_exit(2);
    }
  }
  return pid;
}

int WaitExit(pid_t pid) {
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

SlotHeader& HeaderOf(ShmRing& ring, uint32_t slot) {
  auto* base = static_cast<unsigned char*>(ring.base());
  return *reinterpret_cast<SlotHeader*>(base + sizeof(RingControl) +
                                        slot * (kSlotHeaderBytes + ring.slot_payload_bytes()));
}

RingControl& ControlOf(ShmRing& ring) { return *static_cast<RingControl*>(ring.base()); }

class ShmRingTest : public ::testing::Test {
 protected:
  std::unique_ptr<ShmRing> Make(const std::string& tag, uint32_t slots, uint64_t payload) {
    guard_.name = UniqueName(tag);
    return ShmRing::Create({guard_.name, run_id_, slots, payload});
  }
  const std::string& name() const { return guard_.name; }
  // Every ring of a test is gone by now: nothing may be left in /dev/shm.
  void TearDown() override {
    if (!guard_.name.empty()) {
      EXPECT_FALSE(ShmFileExists(guard_.name)) << guard_.name;
    }
  }

  RunId run_id_ = RunId::Random();
  NameGuard guard_;
};

TEST_F(ShmRingTest, RoundTripSeveralTensors) {
  const std::vector<TensorSpec> specs = {{"bottleneck", DType::kFloat32, {2, 8, 4, 4}},
                                         {"skip0", DType::kFloat16, {2, 3, 5}},
                                         {"labels", DType::kInt64, {3}},
                                         {"scalar", DType::kFloat64, {}},
                                         {"empty", DType::kUInt8, {0, 4}}};
  EXPECT_EQ(ShmRing::PayloadBytesFor(specs), 1024u + 64 + 64 + 64 + 0);
  auto ring = Make("roundtrip", 2, 64 * 1024);
  auto consumer = ShmRing::Open(name(), run_id_);  // a second mapping, at another address
  EXPECT_NE(ring->base(), consumer->base());
  WriteSlot ws = ring->BeginWrite({7, 3, Direction::kBackward}, specs, In(1000));
  ASSERT_EQ(ws.tensor_data.size(), specs.size());
  for (size_t i = 0; i < specs.size(); ++i) Fill(ws.tensor_data[i], SpecBytes(specs[i]), i + 10);
  ring->Commit(ws);
  EXPECT_EQ(ring->head(), 1u);

  ReadSlot rs = consumer->Receive(In(1000));
  EXPECT_EQ(rs.seq, 0u);
  EXPECT_EQ(rs.meta.step, 7u);
  EXPECT_EQ(rs.meta.micro_batch, 3u);
  EXPECT_EQ(rs.meta.direction, Direction::kBackward);
  ASSERT_EQ(rs.tensors.size(), specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    const TensorEntry& e = rs.tensors[i];
    EXPECT_EQ(std::string(e.name), specs[i].name);
    EXPECT_EQ(e.dtype, specs[i].dtype);
    ASSERT_EQ(e.ndim, specs[i].shape.size());
    EXPECT_TRUE(std::equal(specs[i].shape.begin(), specs[i].shape.end(), e.shape));
    EXPECT_EQ(e.bytes, SpecBytes(specs[i]));
    EXPECT_EQ(e.offset % kPayloadAlign, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(rs.tensor_data[i]) % kPayloadAlign, 0u);
    EXPECT_TRUE(Matches(rs.tensor_data[i], e.bytes, i + 10)) << specs[i].name;
  }
  consumer->Release(rs);
  EXPECT_EQ(ring->tail(), 1u);
  consumer.reset();
  ring.reset();
  EXPECT_FALSE(ShmFileExists(name()));
}

TEST_F(ShmRingTest, WraparoundProducerAndConsumerThreads) {
  constexpr uint64_t kMessages = 3000;
  auto ring = Make("wrap", 3, 4096);
  auto consumer = ShmRing::Open(name(), run_id_);
  std::exception_ptr producer_error;
  std::thread producer([&] {
    try {
      for (uint64_t step = 0; step < kMessages; ++step) {
        EXPECT_EQ(Send(*ring, step, VaryingSpecs(step), In(10000)), step);
      }
    } catch (...) {
      producer_error = std::current_exception();
    }
  });
  std::string problem;
  try {
    for (uint64_t step = 0; step < kMessages && problem.empty(); ++step) {
      problem = ReceiveAndCheck(*consumer, step, step, VaryingSpecs(step));
    }
  } catch (const std::exception& e) {
    problem = e.what();
  }
  producer.join();
  if (producer_error) std::rethrow_exception(producer_error);
  EXPECT_EQ(problem, "");
  EXPECT_EQ(ring->head(), kMessages);
  EXPECT_EQ(ring->tail(), kMessages);
}

TEST_F(ShmRingTest, FullRingTimesOutThenSucceedsAfterRelease) {
  auto ring = Make("full", 2, 1024);
  const auto specs = VaryingSpecs(1);
  Send(*ring, 0, specs, In(100));
  Send(*ring, 1, specs, In(100));
  const auto start = steady_clock::now();
  try {
    ring->BeginWrite({2, 0, Direction::kForward}, specs, In(50));
    FAIL() << "BeginWrite on a full ring returned";
  } catch (const TimeoutError& e) {
    EXPECT_GE(MsSince(start), 45);
    EXPECT_NE(std::string(e.what()).find(name()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("a free slot"), std::string::npos) << e.what();
  }
  ring->Release(ring->Receive(In(100)));
  EXPECT_EQ(Send(*ring, 2, specs, In(100)), 2u);
}

TEST_F(ShmRingTest, EmptyRingReceiveTimesOut) {
  auto ring = Make("empty", 2, 1024);
  const auto start = steady_clock::now();
  try {
    ring->Receive(In(30));
    FAIL() << "Receive on an empty ring returned";
  } catch (const TimeoutError& e) {
    EXPECT_GE(MsSince(start), 25);
    EXPECT_NE(std::string(e.what()).find("the next message"), std::string::npos) << e.what();
  }
}

TEST_F(ShmRingTest, InvalidMessagesRejectedBeforeAnythingIsWritten) {
  auto ring = Make("oversize", 2, 1024);
  const std::vector<unsigned char> before(
      static_cast<unsigned char*>(ring->base()),
      static_cast<unsigned char*>(ring->base()) + ring->mapped_bytes());
  const MessageMeta meta{0, 0, Direction::kForward};
  try {
    ring->BeginWrite(meta, {{"big", DType::kFloat32, {300}}}, In(10000));
    FAIL() << "oversize BeginWrite returned";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("1216"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("1024"), std::string::npos) << e.what();
  }
  std::vector<TensorSpec> too_many(kMaxTensors + 1, TensorSpec{"t", DType::kUInt8, {1}});
  EXPECT_THROW(ring->BeginWrite(meta, too_many, In(100)), UsageError);
  EXPECT_THROW(
      ring->BeginWrite(meta, {{std::string(kNameBytes, 'n'), DType::kUInt8, {1}}}, In(100)),
      UsageError);
  EXPECT_THROW(ring->BeginWrite(meta, {{"x", DType::kUInt8, std::vector<int64_t>(9, 1)}}, In(100)),
               UsageError);
  EXPECT_THROW(ring->BeginWrite(meta, {{"x", DType::kUInt8, {-1}}}, In(100)), UsageError);
  EXPECT_THROW(ring->BeginWrite(meta, {{"x", static_cast<DType>(9), {1}}}, In(100)), UsageError);
  EXPECT_EQ(std::memcmp(before.data(), ring->base(), before.size()), 0);
  EXPECT_EQ(ring->head(), 0u);
  EXPECT_THROW(ring->Receive(In(20)), TimeoutError);

  // Rejected even when the ring is full: no waiting for a slot first.
  Send(*ring, 0, VaryingSpecs(0), In(100));
  Send(*ring, 1, VaryingSpecs(1), In(100));
  const auto start = steady_clock::now();
  EXPECT_THROW(ring->BeginWrite(meta, {{"big", DType::kFloat32, {300}}}, In(10000)), UsageError);
  EXPECT_LT(MsSince(start), 1000);
}

TEST_F(ShmRingTest, UncommittedWriteIsNeverSeen) {
  auto ring = Make("torn", 2, 1024);
  auto consumer = ShmRing::Open(name(), run_id_);
  WriteSlot ws = ring->BeginWrite({0, 0, Direction::kForward}, VaryingSpecs(5), In(100));
  Fill(ws.tensor_data[0], SpecBytes(VaryingSpecs(5)[0]), 1);
  EXPECT_THROW(consumer->Receive(In(30)), TimeoutError);
  EXPECT_EQ(HeaderOf(*ring, 0).complete_seq.load(), 0u);

  // A new BeginWrite abandons the uncommitted one and reuses its sequence;
  // the abandoned WriteSlot can no longer be committed.
  EXPECT_EQ(Send(*ring, 6, VaryingSpecs(6), In(100)), ws.seq);
  EXPECT_THROW(ring->Commit(ws), UsageError);
  EXPECT_EQ(ReceiveAndCheck(*consumer, 0, 6, VaryingSpecs(6)), "");
  EXPECT_EQ(ring->head(), 1u);
}

TEST_F(ShmRingTest, ProducerKilledMidWriteLeavesNothingAccepted) {
  auto ring = Make("killed", 2, 1024);
  ring->AttachAsConsumer();
  const std::string ring_name = name();
  const RunId id = run_id_;
  const pid_t child = ForkChild([&] {
    auto producer = ShmRing::Open(ring_name, id);
    producer->AttachAsProducer();
    WriteSlot ws = producer->BeginWrite({9, 0, Direction::kForward}, VaryingSpecs(9), In(1000));
    Fill(ws.tensor_data[0], SpecBytes(VaryingSpecs(9)[0]), 3);
    // Dies here, before Commit.
  });
  ASSERT_GT(child, 0);
  EXPECT_THROW(ring->Receive(In(5000)), PeerGoneError);  // zombie or reaped: either is gone
  EXPECT_EQ(WaitExit(child), 0);
  EXPECT_THROW(ring->Receive(In(5000)), PeerGoneError);
  EXPECT_EQ(ring->head(), 0u);
  // A new producer takes over the dead one's place and its message arrives intact.
  ring->AttachAsProducer();
  Send(*ring, 4, VaryingSpecs(4), In(100));
  EXPECT_EQ(ReceiveAndCheck(*ring, 0, 4, VaryingSpecs(4)), "");
}

TEST_F(ShmRingTest, ForgedHeadersAreRejected) {
  auto ring = Make("forged", 2, 1024);
  SlotHeader& h = HeaderOf(*ring, 0);
  // head advanced without the slot being complete: rejected, not returned.
  ring->BeginWrite({0, 0, Direction::kForward}, VaryingSpecs(3), In(100));
  ControlOf(*ring).head.store(1);
  try {
    ring->Receive(In(100));
    FAIL() << "Receive returned a slot whose write did not complete";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("complete_seq is 0"), std::string::npos) << e.what();
  }
  ControlOf(*ring).head.store(0);
  Send(*ring, 3, VaryingSpecs(3), In(100));

  auto expect_rejected = [&](const char* field) {
    try {
      ring->Receive(In(100));
      ADD_FAILURE() << "forged " << field << " accepted";
    } catch (const TimeoutError&) {
      ADD_FAILURE() << "forged " << field << " timed out instead of being rejected";
    } catch (const RuntimeError& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  h.complete_seq.store(7);
  expect_rejected("complete_seq");
  h.complete_seq.store(1);
  h.magic ^= 1;
  expect_rejected("magic");
  h.magic ^= 1;
  h.run_id.bytes[0] ^= 1;
  expect_rejected("run_id");
  h.run_id.bytes[0] ^= 1;
  h.tensors[1].offset += 8;
  expect_rejected("tensors[1].offset");
  h.tensors[1].offset += 1024 - 8;
  expect_rejected("tensors[1].offset");
  h.tensors[1].offset -= 1024;
  h.tensors[0].bytes += 4;
  expect_rejected("tensors[0].bytes");
  h.tensors[0].bytes -= 4;
  h.n_tensors = kMaxTensors + 1;
  expect_rejected("n_tensors");
  h.n_tensors = 2;
  EXPECT_EQ(ReceiveAndCheck(*ring, 0, 3, VaryingSpecs(3)), "");
}

TEST_F(ShmRingTest, OutOfOrderRelease) {
  auto ring = Make("order", 4, 1024);
  const auto specs = VaryingSpecs(2);
  for (uint64_t i = 0; i < 4; ++i) Send(*ring, i, specs, In(100));
  std::vector<ReadSlot> got;
  for (int i = 0; i < 4; ++i) got.push_back(ring->Receive(In(100)));
  ring->Release(got[2]);
  EXPECT_EQ(ring->tail(), 0u);
  ring->Release(got[1]);
  EXPECT_EQ(ring->tail(), 0u);
  EXPECT_THROW(ring->BeginWrite({4, 0, Direction::kForward}, specs, In(20)), TimeoutError);
  ring->Release(got[0]);
  EXPECT_EQ(ring->tail(), 3u);
  EXPECT_THROW(ring->Release(got[1]), UsageError);  // twice
  for (uint64_t i = 4; i < 7; ++i) EXPECT_EQ(Send(*ring, i, specs, In(100)), i);
  EXPECT_THROW(ring->BeginWrite({7, 0, Direction::kForward}, specs, In(20)), TimeoutError);
  ReadSlot never_received = got[3];
  never_received.seq = 5;
  EXPECT_THROW(ring->Release(never_received), UsageError);
  ring->Release(got[3]);
  EXPECT_EQ(ring->tail(), 4u);
  for (uint64_t i = 4; i < 7; ++i) EXPECT_EQ(ReceiveAndCheck(*ring, i, i, specs), "");
  EXPECT_EQ(ring->tail(), 7u);
}

TEST_F(ShmRingTest, OpenFailsClearly) {
  auto ring = Make("open", 2, 1024);
  const RunId other = RunId::Random();
  try {
    ShmRing::Open(name(), other);
    FAIL() << "Open with the wrong run id returned";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find(other.Hex()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(run_id_.Hex()), std::string::npos) << e.what();
  }
  const std::string missing = UniqueName("missing");
  try {
    ShmRing::Open(missing, run_id_);
    FAIL() << "Open of a missing ring returned";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(ShmFileExists(missing));
  EXPECT_THROW(ShmRing::Open("bad/name", run_id_), UsageError);
  EXPECT_THROW(ShmRing::Create({name(), run_id_, 2, 1024}), RuntimeError);  // exists already
  EXPECT_THROW(ShmRing::Create({UniqueName("z"), RunId{}, 2, 1024}), UsageError);
  EXPECT_THROW(ShmRing::Create({UniqueName("z"), run_id_, 0, 1024}), UsageError);
  EXPECT_THROW(ShmRing::Create({UniqueName("z"), run_id_, 2, 0}), UsageError);
  // A segment that is not a ring.
  NameGuard plain{UniqueName("plain")};
  ShmSegment seg = ShmSegment::Create(plain.name, 4096);
  EXPECT_THROW(ShmRing::Open(plain.name, run_id_), RuntimeError);
}

TEST_F(ShmRingTest, AbortWakesBlockedWaiters) {
  auto ring = Make("abort", 1, 1024);
  auto consumer = ShmRing::Open(name(), run_id_);
  std::string caught;
  double waited_ms = 0;
  std::thread waiter([&] {
    const auto start = steady_clock::now();
    try {
      consumer->Receive(In(10000));
    } catch (const PeerGoneError& e) {
      caught = e.what();
    } catch (const std::exception& e) {
      caught = std::string("wrong exception: ") + e.what();
    }
    waited_ms = MsSince(start);
  });
  std::this_thread::sleep_for(milliseconds(50));
  ring->Abort("launcher: encoder crashed");
  ring->Abort("a second reason is ignored");
  waiter.join();
  EXPECT_NE(caught.find("launcher: encoder crashed"), std::string::npos) << caught;
  EXPECT_LT(waited_ms, 2000);
  EXPECT_TRUE(consumer->aborted());
  EXPECT_THROW(ring->BeginWrite({0, 0, Direction::kForward}, VaryingSpecs(0), In(10000)),
               PeerGoneError);
}

TEST_F(ShmRingTest, DeadConsumerIsNoticedPromptly) {
  auto ring = Make("deadpeer", 1, 1024);
  ring->AttachAsProducer();
  Send(*ring, 0, VaryingSpecs(0), In(100));  // the ring is now full
  const std::string ring_name = name();
  const RunId id = run_id_;
  const pid_t child = ForkChild([&] {
    auto consumer = ShmRing::Open(ring_name, id);
    consumer->AttachAsConsumer();
    std::this_thread::sleep_for(milliseconds(20));
  });
  ASSERT_GT(child, 0);
  const auto start = steady_clock::now();
  while (ControlOf(*ring).consumer_pid.load() != child && MsSince(start) < 5000) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  // Not reaped yet: the child turns into a zombie, which must count as gone.
  try {
    ring->BeginWrite({1, 0, Direction::kForward}, VaryingSpecs(1), In(10000));
    FAIL() << "BeginWrite returned on a full ring with a dead consumer";
  } catch (const PeerGoneError& e) {
    EXPECT_NE(std::string(e.what()).find("consumer process " + std::to_string(child) + " is gone"),
              std::string::npos)
        << e.what();
  }
  EXPECT_LT(MsSince(start), 2000);
  EXPECT_EQ(WaitExit(child), 0);
}

TEST_F(ShmRingTest, ProducerInAnotherProcess) {
  constexpr uint64_t kMessages = 300;
  auto ring = Make("fork", 3, 8192);
  ring->AttachAsConsumer();
  const std::string ring_name = name();
  const RunId id = run_id_;
  const pid_t child = ForkChild([&] {
    auto producer = ShmRing::Open(ring_name, id);
    producer->AttachAsProducer();
    for (uint64_t step = 0; step < kMessages; ++step) {
      Send(*producer, step, VaryingSpecs(step), In(10000));
    }
  });
  ASSERT_GT(child, 0);
  std::string problem;
  try {
    for (uint64_t step = 0; step < kMessages && problem.empty(); ++step) {
      problem = ReceiveAndCheck(*ring, step, step, VaryingSpecs(step));
    }
  } catch (const std::exception& e) {
    problem = e.what();
  }
  EXPECT_EQ(problem, "");
  EXPECT_EQ(WaitExit(child), 0);
  ring.reset();
  EXPECT_FALSE(ShmFileExists(ring_name));
}

TEST_F(ShmRingTest, SegmentRemovedWhenOwnerIsDestroyedOnly) {
  auto ring = Make("owner", 2, 1024);
  EXPECT_TRUE(ShmFileExists(name()));
  ShmRing::Open(name(), run_id_).reset();  // an opener never removes
  EXPECT_TRUE(ShmFileExists(name()));
  ring.reset();
  EXPECT_FALSE(ShmFileExists(name()));
  EXPECT_FALSE(ShmSegment::Exists(name()));
}

TEST_F(ShmRingTest, SegmentIsPrivateToTheUser) {
  const mode_t old_mask = ::umask(0);
  auto ring = Make("mode", 2, 1024);
  ::umask(old_mask);
  struct stat st;
  ASSERT_EQ(::stat(("/dev/shm/" + name()).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_uid, ::getuid());
}

TEST(ShmSegmentTest, OwnershipMovesAndDisownKeepsTheName) {
  NameGuard guard{UniqueName("seg")};
  EXPECT_THROW(ShmSegment::Create("", 10), UsageError);
  EXPECT_THROW(ShmSegment::Create("a/b", 10), UsageError);
  EXPECT_THROW(ShmSegment::Create(std::string(201, 'a'), 10), UsageError);
  EXPECT_THROW(ShmSegment::Create(guard.name, 0), UsageError);
  {
    ShmSegment a = ShmSegment::Create(guard.name, 10000);
    EXPECT_GE(a.size(), 10000u);
    static_cast<char*>(a.data())[9999] = 42;
    ShmSegment b = std::move(a);
    EXPECT_FALSE(a.owns_name());
    EXPECT_TRUE(b.owns_name());
    ShmSegment c = ShmSegment::Open(guard.name);
    EXPECT_EQ(static_cast<char*>(c.data())[9999], 42);
    b.Disown();
  }
  EXPECT_TRUE(ShmSegment::Exists(guard.name));
  EXPECT_TRUE(ShmSegment::Remove(guard.name));
  EXPECT_FALSE(ShmSegment::Remove(guard.name));
  EXPECT_FALSE(ShmFileExists(guard.name));
}

TEST(RunIdTest, HexRoundTripAndErrors) {
  const RunId a = RunId::Random();
  const RunId b = RunId::Random();
  EXPECT_NE(a, b);
  EXPECT_EQ(a.Hex().size(), 32u);
  EXPECT_EQ(RunId::FromHex(a.Hex()), a);
  std::string upper = a.Hex();
  for (char& c : upper) c = static_cast<char>(std::toupper(c));
  EXPECT_EQ(RunId::FromHex(upper), a);
  EXPECT_THROW(RunId::FromHex("abc"), UsageError);
  EXPECT_THROW(RunId::FromHex(std::string(31, '0') + "g"), UsageError);
  EXPECT_EQ(DTypeSize(DType::kBFloat16), 2u);
  EXPECT_THROW(DTypeSize(static_cast<DType>(0)), UsageError);
}

}  // namespace
}  // namespace up::ipc
