// Boundary tensors between the stages: the interface both transports
// implement (the shared-memory ring here; CUDA IPC and c10d elsewhere) and
// the shared-memory implementation.
//
// A sender copies each tensor once, into the transport's buffer. A receiver
// returns tensors that VIEW the transport's buffer (zero copy): they stay
// valid until Release(message), and the buffer goes back to the sender only
// then (the decoder keeps skip tensors until its backward is done).
// One thread per endpoint; an endpoint belongs to one process.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "ipc/shm_ring.h"

namespace up::ipc {

using Deadline = std::chrono::steady_clock::time_point;

struct NamedTensor {
  std::string name;
  torch::Tensor tensor;
};

struct TensorMessage {
  MessageMeta meta;
  uint64_t seq = 0;
  std::vector<NamedTensor> tensors;  // views into the transport's buffer
};

class TensorSender {
 public:
  virtual ~TensorSender() = default;
  // Copies `tensors` (any device the transport accepts, any strides) out.
  virtual void Send(const MessageMeta& meta, const std::vector<NamedTensor>& tensors,
                    Deadline deadline) = 0;
};

class TensorReceiver {
 public:
  virtual ~TensorReceiver() = default;
  virtual TensorMessage Receive(Deadline deadline) = 0;
  virtual void Release(const TensorMessage& message) = 0;
};

DType ToWireDType(c10::ScalarType type);  // UsageError for types the wire cannot carry
c10::ScalarType FromWireDType(DType type);

// Over a ShmRing (not owned; must outlive the endpoint).
class ShmTensorSender : public TensorSender {
 public:
  explicit ShmTensorSender(ShmRing& ring) : ring_(ring) { ring_.AttachAsProducer(); }
  void Send(const MessageMeta& meta, const std::vector<NamedTensor>& tensors,
            Deadline deadline) override;

 private:
  ShmRing& ring_;
};

class ShmTensorReceiver : public TensorReceiver {
 public:
  explicit ShmTensorReceiver(ShmRing& ring) : ring_(ring) { ring_.AttachAsConsumer(); }
  TensorMessage Receive(Deadline deadline) override;
  void Release(const TensorMessage& message) override;

 private:
  ShmRing& ring_;
  std::vector<ReadSlot> held_;  // received, not yet released
};

}  // namespace up::ipc
