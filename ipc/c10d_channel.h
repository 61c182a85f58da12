// Boundary tensors between stages on different machines (or GPUs) over
// LibTorch's own distributed engine, c10d: a process group of one rank per
// stage (rank = the stage's place in the pipeline: with two stages the
// encoder is rank 0, the decoder rank 1) that meets through the TCPStore
// node 0's launcher serves.
//
// Each message is a fixed-size header (step, micro-batch, direction, then
// each tensor's name, dtype and shape) and one point-to-point send per
// tensor, all on one tag per direction, so the receiver matches them in
// order (one pair of tags per pair of stages). Sends are asynchronous and bounded: a sender keeps
// up to `max_in_flight` messages (and their tensors) outstanding, like the ring's slots, so two
// stages that send to each other at once cannot deadlock. Every wait ends at its deadline with an
// error naming the peer. The header is checked (tensor count, dims, total bytes against the size
// agreed in the handshake) before anything is allocated.
//
// Gloo carries CPU tensors (device tensors are copied to the host first);
// NCCL carries CUDA tensors. One thread per endpoint.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <deque>
#include <string>

#include "ipc/tensor_channel.h"

namespace up::ipc {

struct C10dOptions {
  std::string backend = "gloo";  // gloo | nccl
  std::string store_host;        // the TCPStore (node 0's launcher)
  int store_port = 0;
  std::string prefix;     // keys of this run in the store (its run id)
  int rank = 0;           // the stage's place in the pipeline
  int world_size = 2;     // the stages
  std::string bind_host;  // this node's address for the group's sockets
  double timeout_s = 120;
  std::string peers;  // who the others are, for errors (empty: the other stages)
};

// Joins the stages' process group. UsageError for an unknown backend or
// NCCL without a CUDA device; TimeoutError when the peer does not join.
c10::intrusive_ptr<c10d::Backend> JoinStageGroup(const C10dOptions& options,
                                                 const torch::Device& device);

class C10dTensorSender : public TensorSender {
 public:
  // `device`: where the backend wants tensors (CPU for Gloo).
  C10dTensorSender(c10::intrusive_ptr<c10d::Backend> group, int peer, int tag, torch::Device device,
                   int max_in_flight, double timeout_s);
  ~C10dTensorSender() override;  // waits (bounded) for the sends in flight
  void Send(const MessageMeta& meta, const std::vector<NamedTensor>& tensors,
            Deadline deadline) override;

 private:
  struct InFlight {
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    std::vector<torch::Tensor> tensors;  // alive until their sends complete
  };
  void WaitOldest(Deadline deadline);

  c10::intrusive_ptr<c10d::Backend> group_;
  int peer_, tag_;
  torch::Device device_;
  size_t max_in_flight_;
  double timeout_s_;
  std::deque<InFlight> in_flight_;
};

class C10dTensorReceiver : public TensorReceiver {
 public:
  // `max_message_bytes`: the most a message may carry (from the boundary
  // shapes agreed in the handshake).
  C10dTensorReceiver(c10::intrusive_ptr<c10d::Backend> group, int peer, int tag,
                     torch::Device device, uint64_t max_message_bytes);
  // The tensors are owned (not views); Release has nothing to return.
  TensorMessage Receive(Deadline deadline) override;
  void Release(const TensorMessage&) override {}

 private:
  c10::intrusive_ptr<c10d::Backend> group_;
  int peer_, tag_;
  torch::Device device_;
  uint64_t max_message_bytes_;
  uint64_t seq_ = 0;
};

// Creates the NCCL backend (c10d_nccl.cpp; a build without NCCL says so).
c10::intrusive_ptr<c10d::Backend> MakeNcclGroup(c10::intrusive_ptr<c10d::Store> store, int rank,
                                                int size, double timeout_s);

}  // namespace up::ipc
