// `unet-pipeline bench transport`: one-way throughput and latency of every
// transport this build has, each next to a single-thread memcpy of the same
// bytes measured in the same run, for messages of 4 KiB up to --max-bytes
// (powers of 4).
//
// A transport enters the benchmark as a BenchTransport: a factory of
// BenchChannels, each carrying messages of one size through the transport's
// own TensorSender/TensorReceiver (tensor_channel.h). The loop in
// bench_transport.cpp is the same for every transport: the producer is this
// process, the consumer a forked child; cuda_ipc would become one more entry
// of BuiltTransports().
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ipc/tensor_channel.h"

namespace up::bench {

// A channel for messages of one size, made in the producer before the
// consumer is forked. Sender() is then called once in the producer and
// Receiver() once in the consumer; the channel owns what they use.
class BenchChannel {
 public:
  virtual ~BenchChannel() = default;
  virtual std::unique_ptr<ipc::TensorSender> Sender() = 0;
  virtual std::unique_ptr<ipc::TensorReceiver> Receiver() = 0;
  // Where the producer's source tensor lives.
  virtual torch::Device device() const { return torch::kCPU; }
};

struct BenchTransport {
  std::string name;  // the "transport" of each result row, e.g. "shm"
  // A channel for one float32 tensor of `bytes` bytes per message, with
  // `slots` messages in flight at most.
  std::function<std::unique_ptr<BenchChannel>(uint64_t bytes, uint32_t slots)> open;
};

// The shared-memory ring (bench_transport_shm.cpp).
std::unique_ptr<BenchChannel> OpenShmChannel(uint64_t bytes, uint32_t slots);
// c10d's Gloo on loopback, as between two machines (bench_transport_gloo.cpp).
std::unique_ptr<BenchChannel> OpenGlooChannel(uint64_t bytes, uint32_t slots);
// Every transport this build runs without a GPU: shm and gloo.
std::vector<BenchTransport> BuiltTransports();

struct TransportOptions {
  uint64_t min_bytes = 4096;
  uint64_t max_bytes = uint64_t{256} << 20;
  int repeats = 3;        // timed streams per size and side, alternated; the median is kept
  double seconds = 0.25;  // target length of one timed stream
  uint32_t slots = 4;     // messages in flight (the ring's slots)
};

struct TransportRow {
  std::string transport;
  uint64_t bytes = 0;
  int64_t messages = 0;    // per timed stream
  double gbps = 0;         // transport, 1e9 bytes/s
  double memcpy_gbps = 0;  // single-thread memcpy of the same bytes
  double ratio = 0;        // gbps / memcpy_gbps
  double latency_us = 0;   // median one-way time of one message of `bytes`
  double memcpy_us = 0;    // median time of one memcpy of `bytes`
};

// Runs every built transport over every size. Throws UsageError for bad
// options, RuntimeError if a channel or the consumer process fails.
std::vector<TransportRow> RunTransportBench(const TransportOptions& options);

std::string TransportJson(const std::vector<TransportRow>& rows, const TransportOptions& options);
std::string TransportTable(const std::vector<TransportRow>& rows, const TransportOptions& options);

}  // namespace up::bench
