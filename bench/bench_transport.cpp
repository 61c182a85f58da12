// The transport benchmark's loop (see bench_transport.h), the same for every
// transport. For each size: the producer (this process, one torch thread)
// sends a stream of messages through the channel while a forked consumer
// receives each zero-copy view and releases it without reading the payload;
// a stream's time runs from its first Send to the consumer's acknowledgement
// of its last message. Each timed stream alternates with a timed stream of
// single-thread memcpy()s of the same bytes from the same source into as many
// warmed destination buffers as the channel has slots. Latency: messages sent
// one at a time into an empty channel, each stamped with CLOCK_MONOTONIC
// before Send; the consumer takes the clock again when Receive returns.
#include "bench/bench_transport.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iostream>
#include <sstream>

#include "bench/bench_machine.h"
#include "bench/bench_util.h"
#include "common/base/errors.h"
#include "common/base/json_writer.h"

namespace up::bench {
namespace {

using Clock = std::chrono::steady_clock;  // CLOCK_MONOTONIC: one clock for both processes

// What a message asks of the consumer (carried in MessageMeta::micro_batch).
enum Kind : uint32_t { kStream = 0, kStreamEnd = 1, kPing = 2, kQuit = 3 };

constexpr int64_t kMaxMessages = 20000;
constexpr int kAckTimeoutMs = 120000;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}
double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}
ipc::Deadline Far() { return Clock::now() + std::chrono::seconds(120); }

void WriteAll(int fd, const void* data, size_t n) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) throw RuntimeError(std::string("bench consumer: write failed: ") + strerror(errno));
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// The consumer: a forked child that serves one channel until kQuit. It acks
// (one byte on a pipe) each kStreamEnd and kPing after releasing it, and on
// kQuit sends the median ping latency (a double, microseconds) and exits.
class ForkedConsumer {
 public:
  explicit ForkedConsumer(BenchChannel& channel) {
    int fds[2];
    if (::pipe(fds) != 0) throw RuntimeError("bench transport: pipe() failed");
    std::cout.flush();
    std::cerr.flush();
    pid_ = ::fork();
    if (pid_ < 0) throw RuntimeError("bench transport: fork() failed; check the process limit");
    if (pid_ == 0) {
      ::close(fds[0]);
      Serve(channel, fds[1]);  // never returns
    }
    ::close(fds[1]);
    fd_ = fds[0];
  }
  ForkedConsumer(const ForkedConsumer&) = delete;
  ForkedConsumer& operator=(const ForkedConsumer&) = delete;
  ~ForkedConsumer() {
    if (fd_ >= 0) ::close(fd_);
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  void Read(void* out, size_t n) {
    auto* p = static_cast<char*>(out);
    while (n > 0) {
      pollfd pfd{fd_, POLLIN, 0};
      const int r = ::poll(&pfd, 1, kAckTimeoutMs);
      if (r < 0 && errno == EINTR) continue;
      if (r == 0) throw TimeoutError("bench transport: the consumer did not answer in 120 s");
      const ssize_t got = ::read(fd_, p, n);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) throw RuntimeError("bench transport: the consumer process died; see stderr");
      p += got;
      n -= static_cast<size_t>(got);
    }
  }
  void WaitAck() {
    char ack;
    Read(&ack, 1);
  }
  // After kQuit was sent: the median ping latency, once the child exited cleanly.
  double Finish() {
    double latency_us = 0;
    Read(&latency_us, sizeof(latency_us));
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      throw RuntimeError("bench transport: the consumer process failed; see stderr");
    return latency_us;
  }

 private:
  [[noreturn]] static void Serve(BenchChannel& channel, int ack_fd) {
    int code = 0;
    try {
      std::unique_ptr<ipc::TensorReceiver> rx = channel.Receiver();
      std::vector<double> latencies_us;
      for (;;) {
        const ipc::TensorMessage m = rx->Receive(Far());
        const int64_t now = NowNs();
        const uint32_t kind = m.meta.micro_batch;
        if (kind == kPing) latencies_us.push_back((now - static_cast<int64_t>(m.meta.step)) / 1e3);
        rx->Release(m);
        if (kind == kStreamEnd || kind == kPing) WriteAll(ack_fd, "a", 1);
        if (kind == kQuit) {
          const double median = Median(latencies_us);
          WriteAll(ack_fd, &median, sizeof(median));
          break;
        }
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "unet-pipeline bench: consumer: %s\n", e.what());
      code = 1;
    }
    ::_exit(code);  // no destructors: the segment and the parent's state stay as they are
  }

  pid_t pid_ = -1;
  int fd_ = -1;
};

void Send(ipc::TensorSender& tx, const torch::Tensor& src, Kind kind, uint64_t stamp = 0) {
  tx.Send({stamp, kind, ipc::Direction::kForward}, {{"x", src}}, Far());
}

// Seconds for `n` messages, first Send to the consumer's ack of the last.
double TimeStream(ipc::TensorSender& tx, ForkedConsumer& rx, const torch::Tensor& src, int64_t n) {
  const auto t0 = Clock::now();
  for (int64_t i = 0; i + 1 < n; ++i) Send(tx, src, kStream);
  Send(tx, src, kStreamEnd);
  rx.WaitAck();
  return SecondsSince(t0);
}

// Seconds for `n` memcpy()s of src into dst[i % dst.size()].
double TimeMemcpy(const torch::Tensor& src, std::vector<torch::Tensor>& dst, int64_t n) {
  const size_t bytes = src.nbytes();
  const void* from = src.data_ptr();
  const auto t0 = Clock::now();
  for (int64_t i = 0; i < n; ++i) {
    void* to = dst[static_cast<size_t>(i) % dst.size()].data_ptr();
    std::memcpy(to, from, bytes);
    asm volatile("" : : "r"(to) : "memory");  // the copy has an observer: keep it
  }
  return SecondsSince(t0);
}

TransportRow MeasureSize(const BenchTransport& transport, uint64_t bytes,
                         const TransportOptions& o) {
  const int64_t numel = static_cast<int64_t>(bytes / sizeof(float));
  torch::Tensor src = torch::full({numel}, 1.5f);  // (numel,) float32, pages touched
  std::vector<torch::Tensor> dst;
  for (uint32_t i = 0; i < o.slots; ++i) dst.push_back(torch::zeros({numel}));  // warmed

  // Calibrate the stream length on memcpy (warm first).
  TimeMemcpy(src, dst, o.slots);
  const double copy_per_msg = TimeMemcpy(src, dst, 2 * o.slots) / (2 * o.slots);

  std::unique_ptr<BenchChannel> channel = transport.open(bytes, o.slots);
  ForkedConsumer rx(*channel);
  std::unique_ptr<ipc::TensorSender> tx = channel->Sender();
  TimeStream(*tx, rx, src, 2 * o.slots);  // warm-up: every slot faulted in on both sides
  // Streams last about o.seconds on the slower of the transport and memcpy.
  const double per_msg =
      std::max(copy_per_msg, TimeStream(*tx, rx, src, 2 * o.slots) / (2 * o.slots));
  const int64_t n = std::clamp<int64_t>(static_cast<int64_t>(std::ceil(o.seconds / per_msg)),
                                        2 * o.slots, kMaxMessages);
  const int pings = std::clamp(static_cast<int>(o.seconds / 2 / (per_msg + 50e-6)), 10, 200);

  std::vector<double> ring_gbps, copy_gbps, copy_us;
  for (int r = 0; r < o.repeats; ++r) {
    const double tc = TimeMemcpy(src, dst, n);
    copy_gbps.push_back(n * static_cast<double>(bytes) / tc / 1e9);
    copy_us.push_back(tc / n * 1e6);
    const double tr = TimeStream(*tx, rx, src, n);
    ring_gbps.push_back(n * static_cast<double>(bytes) / tr / 1e9);
  }
  for (int p = 0; p < pings; ++p) {
    Send(*tx, src, kPing, static_cast<uint64_t>(NowNs()));
    rx.WaitAck();
  }
  Send(*tx, src, kQuit);

  TransportRow row;
  row.transport = transport.name;
  row.bytes = bytes;
  row.messages = n;
  row.gbps = Median(ring_gbps);
  row.memcpy_gbps = Median(copy_gbps);
  row.ratio = row.gbps / row.memcpy_gbps;
  row.latency_us = rx.Finish();
  row.memcpy_us = Median(copy_us);
  return row;
}

}  // namespace

std::vector<TransportRow> RunTransportBench(const TransportOptions& o) {
  if (o.max_bytes < o.min_bytes) {
    throw UsageError("--max-bytes " + std::to_string(o.max_bytes) + " is below the smallest size " +
                     std::to_string(o.min_bytes) + "; use at least " + std::to_string(o.min_bytes));
  }
  if (o.repeats < 1 || o.repeats > 100)
    throw UsageError("--repeats " + std::to_string(o.repeats) + " is out of range; use 1 to 100");
  if (!(o.seconds > 0 && o.seconds <= 60)) {
    throw UsageError("--seconds " + JsonWriter::FormatDouble(o.seconds) +
                     " is out of range; use more than 0 and at most 60");
  }
  torch::set_num_threads(1);  // the copy into the slot runs on one thread, like memcpy here
  std::vector<TransportRow> rows;
  for (const BenchTransport& t : BuiltTransports()) {
    for (uint64_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= 4) {
      rows.push_back(MeasureSize(t, bytes, o));
    }
  }
  return rows;
}

std::string TransportJson(const std::vector<TransportRow>& rows, const TransportOptions& o) {
  std::string results;
  for (const TransportRow& r : rows) {
    JsonWriter j;
    j.Field("transport", r.transport)
        .Field("bytes", r.bytes)
        .Field("messages", r.messages)
        .Field("gbps", r.gbps)
        .Field("memcpy_gbps", r.memcpy_gbps)
        .Field("ratio", r.ratio)
        .Field("latency_us", r.latency_us)
        .Field("memcpy_us", r.memcpy_us);
    results += (results.empty() ? "" : ",") + j.str();
  }
  JsonWriter method;
  method.Field("consumer", "forked process")
      .Field("slots", static_cast<int64_t>(o.slots))
      .Field("repeats", o.repeats)
      .Field("seconds_per_stream", o.seconds)
      .Field("torch_threads", 1)
      .Field("gbps_unit", "1e9 bytes/s")
      .Field("latency", "median one-way time of one message into an empty channel");
  JsonWriter out;
  out.Field("bench", "transport")
      .Raw("machine", MachineJson(DescribeMachine()))
      .Raw("method", method.str())
      .Raw("results", "[" + results + "]");
  return out.str();
}

std::string TransportTable(const std::vector<TransportRow>& rows, const TransportOptions& o) {
  std::ostringstream s;
  s << "machine: " << MachineText(DescribeMachine()) << "\n"
    << "one-way, consumer in a forked process, " << o.slots << " slots, median of " << o.repeats
    << " streams; GB/s = 1e9 bytes/s\n";
  char line[160];
  std::snprintf(line, sizeof(line), "%-9s %10s %7s %9s %12s %7s %12s %11s\n", "transport", "bytes",
                "msgs", "GB/s", "memcpy GB/s", "ratio", "latency us", "memcpy us");
  s << line;
  for (const TransportRow& r : rows) {
    std::snprintf(line, sizeof(line), "%-9s %10s %7lld %9.2f %12.2f %7.2f %12.1f %11.1f\n",
                  r.transport.c_str(), BytesText(r.bytes).c_str(),
                  static_cast<long long>(r.messages), r.gbps, r.memcpy_gbps, r.ratio, r.latency_us,
                  r.memcpy_us);
    s << line;
  }
  return s.str();
}

}  // namespace up::bench
