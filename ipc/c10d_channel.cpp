// See c10d_channel.h.
#include "ipc/c10d_channel.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
#include <cstring>

#include "common/base/errors.h"
#include "ipc/ring_format.h"
#include "ipc/wire.h"

namespace up::ipc {
namespace {

using Clock = std::chrono::steady_clock;

// Header: u64 length of the encoded part, then the encoded part, zero padded.
constexpr int64_t kHeaderBytes = 4096;

std::chrono::milliseconds Left(Deadline deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}

// The first line of what c10d (c10::Error) or Gloo (gloo::IoException)
// threw, without the source location Gloo puts in front.
std::string C10dMessage(const std::exception& e) {
  const auto* c10 = dynamic_cast<const c10::Error*>(&e);
  std::string what = c10 ? c10->what_without_backtrace() : e.what();
  what = what.substr(0, what.find('\n'));
  if (what.rfind("[/", 0) == 0 && what.find("] ") != std::string::npos)
    what = what.substr(what.find("] ") + 2);
  return what;
}

// Waits for `work`; TimeoutError or PeerGoneError naming `doing`.
void WaitWork(c10d::Work& work, Deadline deadline, const std::string& doing) {
  bool done = false;
  try {
    done = work.wait(Left(deadline));
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    const std::string why = C10dMessage(e);
    if (why.find("imed out") != std::string::npos || Clock::now() >= deadline) {
      throw TimeoutError(doing + " did not complete in time: " + why);
    }
    throw PeerGoneError(doing + " failed: " + why);
  }
  if (!done) throw TimeoutError(doing + " did not complete in time");
}

// Posts a send or receive; a broken connection is PeerGoneError naming `doing`.
template <typename Post>
c10::intrusive_ptr<c10d::Work> PostWork(const Post& post, const std::string& doing) {
  try {
    return post();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw PeerGoneError(doing + " failed: " + C10dMessage(e));
  }
}

std::string PeerName(int rank) { return rank == 0 ? "the encoder" : "the decoder"; }

std::string EncodeHeader(const MessageMeta& meta, const std::vector<NamedTensor>& tensors) {
  WireWriter w;
  w.U64(meta.step).U32(meta.micro_batch).U32(static_cast<uint32_t>(meta.direction));
  w.U32(static_cast<uint32_t>(tensors.size()));
  for (const NamedTensor& t : tensors) {
    w.Str(t.name).U32(static_cast<uint32_t>(ToWireDType(t.tensor.scalar_type())));
    w.I64Vec(t.tensor.sizes().vec());
  }
  return w.Take();
}

}  // namespace

c10::intrusive_ptr<c10d::Backend> JoinStageGroup(const C10dOptions& o,
                                                 const torch::Device& device) {
  const auto timeout =
      std::chrono::milliseconds(static_cast<int64_t>(std::max(o.timeout_s, 0.001) * 1000));
  c10::intrusive_ptr<c10d::Store> store;
  try {
    c10d::TCPStoreOptions so;
    so.port = static_cast<uint16_t>(o.store_port);
    so.isServer = false;
    so.waitWorkers = false;
    so.timeout = timeout;
    store = c10::make_intrusive<c10d::PrefixStore>(
        "up/" + o.prefix + "/pg", c10::make_intrusive<c10d::TCPStore>(o.store_host, so));
  } catch (const std::exception& e) {
    throw TimeoutError("cannot reach the rendezvous store at " + o.store_host + ":" +
                       std::to_string(o.store_port) + ": " + C10dMessage(e));
  }
  const std::string peer = !o.peers.empty()    ? o.peers
                           : o.world_size == 2 ? (o.rank == 0 ? "decoder stage" : "encoder stage")
                                               : "other stages";
  try {
    if (o.backend == "nccl") {
      if (!device.is_cuda()) {
        throw UsageError(
            "pipeline.transport = nccl needs both stages on CUDA devices, this one is " +
            device.str() + "; use gloo");
      }
      return MakeNcclGroup(store, o.rank, o.world_size, o.timeout_s);
    }
    if (o.backend != "gloo") {
      throw UsageError("c10d backend '" + o.backend + "' is not one of gloo, nccl");
    }
    auto options = c10d::ProcessGroupGloo::Options::create(timeout);
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(o.bind_host));
    return c10::make_intrusive<c10d::ProcessGroupGloo>(store, o.rank, o.world_size, options);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw TimeoutError("the " + peer + " did not join the " + o.backend +
                       " process group (rendezvous at " + o.store_host + ":" +
                       std::to_string(o.store_port) + ", this stage on " + o.bind_host +
                       "): " + C10dMessage(e));
  }
}

// ---- C10dTensorSender ----

C10dTensorSender::C10dTensorSender(c10::intrusive_ptr<c10d::Backend> group, int peer, int tag,
                                   torch::Device device, int max_in_flight, double timeout_s)
    : group_(std::move(group)),
      peer_(peer),
      tag_(tag),
      device_(device),
      max_in_flight_(static_cast<size_t>(std::max(max_in_flight, 1))),
      timeout_s_(timeout_s) {}

C10dTensorSender::~C10dTensorSender() {
  // The peer has received everything the schedule sent unless the run is
  // failing; then the group reports the failure and we only stop waiting.
  const Deadline deadline =
      Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_s_ * 1000));
  try {
    while (!in_flight_.empty()) WaitOldest(deadline);
  } catch (const std::exception&) {
  }
}

void C10dTensorSender::WaitOldest(Deadline deadline) {
  InFlight& oldest = in_flight_.front();
  for (auto& work : oldest.works)
    WaitWork(*work, deadline, "sending boundary tensors to " + PeerName(peer_));
  in_flight_.pop_front();
}

void C10dTensorSender::Send(const MessageMeta& meta, const std::vector<NamedTensor>& tensors,
                            Deadline deadline) {
  if (tensors.size() > kMaxTensors) {
    throw UsageError("a boundary message holds " + std::to_string(tensors.size()) +
                     " tensors; the limit is " + std::to_string(kMaxTensors));
  }
  // Sends complete in order; drop the finished ones, wait while full.
  while (!in_flight_.empty() &&
         std::all_of(in_flight_.front().works.begin(), in_flight_.front().works.end(),
                     [](const auto& w) { return w->isCompleted(); })) {
    WaitOldest(deadline);  // surfaces an error the group recorded
  }
  while (in_flight_.size() >= max_in_flight_) WaitOldest(deadline);

  const std::string encoded = EncodeHeader(meta, tensors);
  if (static_cast<int64_t>(encoded.size() + 8) > kHeaderBytes) {
    throw UsageError("boundary message header is " + std::to_string(encoded.size()) +
                     " bytes; the limit is " + std::to_string(kHeaderBytes - 8));
  }
  torch::NoGradGuard no_grad;
  torch::Tensor header = torch::zeros({kHeaderBytes}, torch::kUInt8);  // [4096] bytes
  const uint64_t length = encoded.size();
  std::memcpy(header.data_ptr(), &length, 8);
  std::memcpy(header.data_ptr<uint8_t>() + 8, encoded.data(), encoded.size());

  InFlight sending;
  sending.tensors.push_back(header.to(device_));
  for (const NamedTensor& t : tensors) {
    sending.tensors.push_back(t.tensor.detach().to(device_).contiguous());
  }
  for (torch::Tensor& t : sending.tensors) {
    std::vector<at::Tensor> one{t};
    sending.works.push_back(PostWork([&] { return group_->send(one, peer_, tag_); },
                                     "sending boundary tensors to " + PeerName(peer_)));
  }
  in_flight_.push_back(std::move(sending));
}

// ---- C10dTensorReceiver ----

C10dTensorReceiver::C10dTensorReceiver(c10::intrusive_ptr<c10d::Backend> group, int peer, int tag,
                                       torch::Device device, uint64_t max_message_bytes)
    : group_(std::move(group)),
      peer_(peer),
      tag_(tag),
      device_(device),
      max_message_bytes_(max_message_bytes) {}

TensorMessage C10dTensorReceiver::Receive(Deadline deadline) {
  const std::string from = "boundary tensors from " + PeerName(peer_);
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> header{
      torch::empty({kHeaderBytes}, torch::TensorOptions().dtype(torch::kUInt8).device(device_))};
  WaitWork(*PostWork([&] { return group_->recv(header, peer_, tag_); }, "receiving " + from),
           deadline, "receiving " + from);
  const torch::Tensor bytes = header[0].to(torch::kCPU);
  uint64_t length = 0;
  std::memcpy(&length, bytes.data_ptr(), 8);
  if (length > static_cast<uint64_t>(kHeaderBytes - 8)) {
    throw RuntimeError("malformed header in " + from + ": length " + std::to_string(length));
  }
  const std::string encoded(reinterpret_cast<const char*>(bytes.data_ptr<uint8_t>() + 8), length);
  WireReader r(encoded, "header of " + from);
  TensorMessage msg;
  msg.meta.step = r.U64();
  msg.meta.micro_batch = r.U32();
  const uint32_t direction = r.U32();
  if (direction != static_cast<uint32_t>(Direction::kForward) &&
      direction != static_cast<uint32_t>(Direction::kBackward)) {
    throw RuntimeError("malformed header in " + from + ": direction " + std::to_string(direction));
  }
  msg.meta.direction = static_cast<Direction>(direction);
  const uint32_t count = r.U32();
  if (count > kMaxTensors) {
    throw RuntimeError("malformed header in " + from + ": " + std::to_string(count) +
                       " tensors, the limit is " + std::to_string(kMaxTensors));
  }
  struct Entry {
    std::string name;
    c10::ScalarType dtype;
    std::vector<int64_t> shape;
  };
  std::vector<Entry> entries;
  uint64_t total = 0;
  for (uint32_t i = 0; i < count; ++i) {
    Entry e;
    e.name = r.Str();
    const uint32_t dtype = r.U32();
    if (dtype > 0xff || !IsKnownDType(static_cast<DType>(dtype))) {
      throw RuntimeError("malformed header in " + from + ": dtype " + std::to_string(dtype));
    }
    e.dtype = FromWireDType(static_cast<DType>(dtype));
    e.shape = r.I64Vec();
    if (e.shape.size() > kMaxDims) {
      throw RuntimeError("malformed header in " + from + ": " + std::to_string(e.shape.size()) +
                         " dims for " + e.name);
    }
    uint64_t numel = 1;
    for (int64_t d : e.shape) {
      if (d < 0 || static_cast<uint64_t>(d) > max_message_bytes_) {
        throw RuntimeError("malformed header in " + from + ": dim " + std::to_string(d));
      }
      numel *= static_cast<uint64_t>(std::max<int64_t>(d, 1));
      if (numel > max_message_bytes_) break;
    }
    total += numel * c10::elementSize(e.dtype);
    if (total > max_message_bytes_) {
      throw RuntimeError(from + " announce more than the " + std::to_string(max_message_bytes_) +
                         " bytes the handshake agreed (at " + e.name + ")");
    }
    entries.push_back(std::move(e));
  }
  r.ExpectDone();

  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  for (const Entry& e : entries) {
    std::vector<at::Tensor> one{
        torch::empty(e.shape, torch::TensorOptions().dtype(e.dtype).device(device_))};
    works.push_back(PostWork([&] { return group_->recv(one, peer_, tag_); }, "receiving " + from));
    msg.tensors.push_back({e.name, one[0]});
  }
  for (auto& work : works) WaitWork(*work, deadline, "receiving " + from);
  msg.seq = seq_++;
  return msg;
}

}  // namespace up::ipc
