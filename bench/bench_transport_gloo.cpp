// c10d's Gloo as a BenchChannel: a two-rank process group on loopback, as two
// stages on different machines form it (rendezvous at a TCPStore this process
// serves; one header and one tensor per message, up to `slots` in flight).
#include "bench/bench_transport.h"
#include "ipc/c10d_channel.h"
#include "ipc/shm_ring.h"
#include "launcher/rendezvous.h"

namespace up::bench {
namespace {

class GlooChannel : public BenchChannel {
 public:
  GlooChannel(uint64_t bytes, uint32_t slots)
      : bytes_(bytes),
        slots_(slots),
        prefix_("bench-" + ipc::RunId::Random().Hex()),
        store_(Rendezvous::Serve("127.0.0.1", 0, kTimeoutS)) {}

  std::unique_ptr<ipc::TensorSender> Sender() override {
    return std::make_unique<ipc::C10dTensorSender>(Join(0), 1, 1, torch::kCPU, slots_, kTimeoutS);
  }

  std::unique_ptr<ipc::TensorReceiver> Receiver() override {
    return std::make_unique<ipc::C10dTensorReceiver>(Join(1), 0, 1, torch::kCPU, bytes_);
  }

 private:
  static constexpr double kTimeoutS = 120;

  c10::intrusive_ptr<c10d::Backend> Join(int rank) {
    ipc::C10dOptions o;
    o.backend = "gloo";
    o.store_host = store_.host();
    o.store_port = store_.port();
    o.prefix = prefix_;
    o.rank = rank;
    o.bind_host = "127.0.0.1";
    o.timeout_s = kTimeoutS;
    return ipc::JoinStageGroup(o, torch::kCPU);
  }

  uint64_t bytes_;
  uint32_t slots_;
  std::string prefix_;
  Rendezvous store_;  // served by the producer (the consumer is forked after it starts)
};

}  // namespace

std::unique_ptr<BenchChannel> OpenGlooChannel(uint64_t bytes, uint32_t slots) {
  return std::make_unique<GlooChannel>(bytes, slots);
}

}  // namespace up::bench
