// CUDA implementation of cuda_ipc_channel.h. Compiled and linked in every
// build whose LibTorch has CUDA; it runs only where a GPU is present.
#include "ipc/cuda_ipc_channel.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <thread>

#include "common/base/errors.h"
#include "ipc/shm_segment.h"

namespace up::ipc {
namespace {

using Clock = std::chrono::steady_clock;

// The handle segment: what each side publishes for the other.
struct CudaIpcShared {
  std::atomic<uint32_t> producer_ready;  // slab and ready events published
  std::atomic<uint32_t> consumer_ready;  // done events published
  int32_t producer_device;
  uint32_t slots;
  uint64_t slot_bytes;
  cudaIpcMemHandle_t slab;
  cudaIpcEventHandle_t ready[kMaxCudaIpcSlots];
  cudaIpcEventHandle_t done[kMaxCudaIpcSlots];
};

void Check(cudaError_t rc, const std::string& what) {
  if (rc != cudaSuccess)
    throw RuntimeError("cuda_ipc: " + what + " failed: " + cudaGetErrorString(rc));
}

cudaEvent_t NewInterprocessEvent() {
  cudaEvent_t e = nullptr;
  Check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming | cudaEventInterprocess),
        "cudaEventCreateWithFlags");
  return e;
}

void WaitFlag(const std::atomic<uint32_t>& flag, const ShmRing& ring, Deadline deadline,
              const char* what) {
  while (flag.load(std::memory_order_acquire) == 0) {
    if (ring.aborted())
      throw PeerGoneError("cuda_ipc: the run was aborted while waiting for " + std::string(what));
    if (Clock::now() >= deadline)
      throw TimeoutError(std::string("cuda_ipc: timed out waiting for ") + what);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// Common to both ends: the mapped handle segment and the ring.
class Endpoint {
 protected:
  Endpoint(ShmRing& ring, int device)
      : ring_(ring),
        device_(device),
        handles_(ShmSegment::Open(ring.name() + "-cuda")),
        shared_(static_cast<CudaIpcShared*>(handles_.data())) {
    if (!ring.external_payload())
      throw UsageError("cuda_ipc: ring '" + ring.name() + "' must have an external payload");
    if (ring.slots() > kMaxCudaIpcSlots) {
      throw UsageError("cuda_ipc: " + std::to_string(ring.slots()) + " slots; at most " +
                       std::to_string(kMaxCudaIpcSlots) + " (lower train.micro_batches)");
    }
  }
  uint64_t SlotOffset(uint64_t seq) const {
    return (seq % ring_.slots()) * ring_.slot_payload_bytes();
  }

  ShmRing& ring_;
  int device_;
  ShmSegment handles_;
  CudaIpcShared* shared_;
};

class CudaIpcSender : public TensorSender, private Endpoint {
 public:
  CudaIpcSender(ShmRing& ring, int device) : Endpoint(ring, device) {
    ring_.AttachAsProducer();
    c10::cuda::CUDAGuard guard(device_);
    Check(cudaMalloc(&slab_, ring_.slots() * ring_.slot_payload_bytes()), "cudaMalloc of the slab");
    Check(cudaIpcGetMemHandle(&shared_->slab, slab_), "cudaIpcGetMemHandle");
    for (uint32_t s = 0; s < ring_.slots(); ++s) {
      ready_[s] = NewInterprocessEvent();
      Check(cudaIpcGetEventHandle(&shared_->ready[s], ready_[s]), "cudaIpcGetEventHandle");
    }
    shared_->producer_device = device_;
    shared_->slots = ring_.slots();
    shared_->slot_bytes = ring_.slot_payload_bytes();
    shared_->producer_ready.store(1, std::memory_order_release);
  }
  ~CudaIpcSender() override {
    for (uint32_t s = 0; s < ring_.slots(); ++s) {
      if (ready_[s]) cudaEventDestroy(ready_[s]);
      if (done_[s]) cudaEventDestroy(done_[s]);
    }
    if (slab_) cudaFree(slab_);
  }

  void Send(const MessageMeta& meta, const std::vector<NamedTensor>& tensors,
            Deadline deadline) override {
    if (!peer_open_) {
      WaitFlag(shared_->consumer_ready, ring_, deadline, "the consumer's events");
      for (uint32_t s = 0; s < ring_.slots(); ++s) {
        Check(cudaIpcOpenEventHandle(&done_[s], shared_->done[s]), "cudaIpcOpenEventHandle");
      }
      peer_open_ = true;
    }
    std::vector<TensorSpec> specs;
    for (const auto& t : tensors)
      specs.push_back({t.name, ToWireDType(t.tensor.scalar_type()), t.tensor.sizes().vec()});
    WriteSlot slot = ring_.BeginWrite(meta, specs, deadline);
    c10::cuda::CUDAGuard guard(device_);
    cudaStream_t stream = at::cuda::getCurrentCUDAStream(device_).stream();
    const uint32_t s = static_cast<uint32_t>(slot.seq % ring_.slots());
    if (slot.seq >= ring_.slots())
      Check(cudaStreamWaitEvent(stream, done_[s], 0), "cudaStreamWaitEvent(done)");
    torch::NoGradGuard no_grad;
    char* base = static_cast<char*>(slab_) + SlotOffset(slot.seq);
    for (size_t i = 0; i < tensors.size(); ++i) {
      const torch::Tensor& src = tensors[i].tensor;
      torch::from_blob(
          base + slot.offsets[i], src.sizes(),
          torch::TensorOptions().dtype(src.scalar_type()).device(torch::kCUDA, device_))
          .copy_(src.detach(), /*non_blocking=*/true);
    }
    Check(cudaEventRecord(ready_[s], stream), "cudaEventRecord(ready)");
    ring_.Commit(slot);
  }

 private:
  void* slab_ = nullptr;
  cudaEvent_t ready_[kMaxCudaIpcSlots] = {};
  cudaEvent_t done_[kMaxCudaIpcSlots] = {};
  bool peer_open_ = false;
};

class CudaIpcReceiver : public TensorReceiver, private Endpoint {
 public:
  CudaIpcReceiver(ShmRing& ring, int device) : Endpoint(ring, device) {
    ring_.AttachAsConsumer();
    c10::cuda::CUDAGuard guard(device_);
    for (uint32_t s = 0; s < ring_.slots(); ++s) {
      done_[s] = NewInterprocessEvent();
      Check(cudaIpcGetEventHandle(&shared_->done[s], done_[s]), "cudaIpcGetEventHandle");
    }
    shared_->consumer_ready.store(1, std::memory_order_release);
  }
  ~CudaIpcReceiver() override {
    for (uint32_t s = 0; s < ring_.slots(); ++s) {
      if (done_[s]) cudaEventDestroy(done_[s]);
      if (ready_[s]) cudaEventDestroy(ready_[s]);
    }
    if (slab_) cudaIpcCloseMemHandle(slab_);  // before the exporter frees it
  }

  TensorMessage Receive(Deadline deadline) override {
    if (!slab_) {
      WaitFlag(shared_->producer_ready, ring_, deadline, "the producer's slab");
      c10::cuda::CUDAGuard guard(device_);
      Check(cudaIpcOpenMemHandle(&slab_, shared_->slab, cudaIpcMemLazyEnablePeerAccess),
            "cudaIpcOpenMemHandle");
      for (uint32_t s = 0; s < ring_.slots(); ++s) {
        Check(cudaIpcOpenEventHandle(&ready_[s], shared_->ready[s]), "cudaIpcOpenEventHandle");
      }
    }
    ReadSlot slot = ring_.Receive(deadline);
    c10::cuda::CUDAGuard guard(device_);
    cudaStream_t stream = at::cuda::getCurrentCUDAStream(device_).stream();
    const uint32_t s = static_cast<uint32_t>(slot.seq % ring_.slots());
    Check(cudaStreamWaitEvent(stream, ready_[s], 0), "cudaStreamWaitEvent(ready)");
    TensorMessage msg;
    msg.meta = slot.meta;
    msg.seq = slot.seq;
    char* base = static_cast<char*>(slab_) + SlotOffset(slot.seq);
    for (const TensorEntry& e : slot.tensors) {
      std::vector<int64_t> shape(e.shape, e.shape + e.ndim);
      msg.tensors.push_back(
          {std::string(e.name), torch::from_blob(base + e.offset, shape,
                                                 torch::TensorOptions()
                                                     .dtype(FromWireDType(e.dtype))
                                                     .device(torch::kCUDA, device_))});
    }
    held_.push_back(std::move(slot));
    return msg;
  }

  void Release(const TensorMessage& message) override {
    auto it = std::find_if(held_.begin(), held_.end(),
                           [&](const ReadSlot& r) { return r.seq == message.seq; });
    if (it == held_.end()) throw UsageError("cuda_ipc: Release of a message not held");
    c10::cuda::CUDAGuard guard(device_);
    const uint32_t s = static_cast<uint32_t>(it->seq % ring_.slots());
    Check(cudaEventRecord(done_[s], at::cuda::getCurrentCUDAStream(device_).stream()),
          "cudaEventRecord(done)");
    ring_.Release(*it);
    held_.erase(it);
  }

 private:
  void* slab_ = nullptr;
  cudaEvent_t ready_[kMaxCudaIpcSlots] = {};
  cudaEvent_t done_[kMaxCudaIpcSlots] = {};
  std::vector<ReadSlot> held_;
};

}  // namespace

size_t CudaIpcHandleSegmentBytes() { return sizeof(CudaIpcShared); }

std::unique_ptr<TensorSender> MakeCudaIpcSender(ShmRing& ring, int device) {
  return std::make_unique<CudaIpcSender>(ring, device);
}

std::unique_ptr<TensorReceiver> MakeCudaIpcReceiver(ShmRing& ring, int device) {
  return std::make_unique<CudaIpcReceiver>(ring, device);
}

}  // namespace up::ipc
