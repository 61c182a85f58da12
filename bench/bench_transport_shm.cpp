// The shared-memory ring as a BenchChannel: the ring is created (and its pages
// touched, by ShmSegment::Create) here as the launcher does, and each side
// opens its own mapping of it as the stages do, so a first pass over the slots
// takes the same page-table faults a stage takes (the benchmark's warm-up
// absorbs them).
#include <string>

#include "bench/bench_transport.h"
#include "ipc/shm_ring.h"

namespace up::bench {
namespace {

class ShmChannel : public BenchChannel {
 public:
  ShmChannel(uint64_t bytes, uint32_t slots) : run_id_(ipc::RunId::Random()) {
    name_ = "up-bench-" + run_id_.Hex();
    const std::vector<ipc::TensorSpec> specs{
        {"x", ipc::DType::kFloat32, {static_cast<int64_t>(bytes / sizeof(float))}}};
    owner_ = ipc::ShmRing::Create({name_, run_id_, slots, ipc::ShmRing::PayloadBytesFor(specs)});
  }

  std::unique_ptr<ipc::TensorSender> Sender() override {
    producer_ = ipc::ShmRing::Open(name_, run_id_);
    return std::make_unique<ipc::ShmTensorSender>(*producer_);
  }

  std::unique_ptr<ipc::TensorReceiver> Receiver() override {
    consumer_ = ipc::ShmRing::Open(name_, run_id_);
    return std::make_unique<ipc::ShmTensorReceiver>(*consumer_);
  }

 private:
  ipc::RunId run_id_;
  std::string name_;
  std::unique_ptr<ipc::ShmRing> owner_;  // removes the segment when the channel goes
  std::unique_ptr<ipc::ShmRing> producer_;
  std::unique_ptr<ipc::ShmRing> consumer_;
};

}  // namespace

std::unique_ptr<BenchChannel> OpenShmChannel(uint64_t bytes, uint32_t slots) {
  return std::make_unique<ShmChannel>(bytes, slots);
}

std::vector<BenchTransport> BuiltTransports() {
  return {{"shm", OpenShmChannel}, {"gloo", OpenGlooChannel}};
}

}  // namespace up::bench
