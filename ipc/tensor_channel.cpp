// See tensor_channel.h.
#include "ipc/tensor_channel.h"

#include <algorithm>
#include <cstring>

#include "common/errors.h"

namespace up::ipc {

DType ToWireDType(c10::ScalarType type) {
  switch (type) {
    case torch::kFloat32:
      return DType::kFloat32;
    case torch::kFloat16:
      return DType::kFloat16;
    case torch::kBFloat16:
      return DType::kBFloat16;
    case torch::kFloat64:
      return DType::kFloat64;
    case torch::kInt64:
      return DType::kInt64;
    case torch::kInt32:
      return DType::kInt32;
    case torch::kUInt8:
      return DType::kUInt8;
    default:
      throw UsageError(std::string("tensor dtype ") + c10::toString(type) +
                       " cannot cross the boundary");
  }
}

c10::ScalarType FromWireDType(DType type) {
  switch (type) {
    case DType::kFloat32:
      return torch::kFloat32;
    case DType::kFloat16:
      return torch::kFloat16;
    case DType::kBFloat16:
      return torch::kBFloat16;
    case DType::kFloat64:
      return torch::kFloat64;
    case DType::kInt64:
      return torch::kInt64;
    case DType::kInt32:
      return torch::kInt32;
    case DType::kUInt8:
      return torch::kUInt8;
  }
  throw RuntimeError("unknown wire dtype " + std::to_string(static_cast<int>(type)));
}

void ShmTensorSender::Send(const MessageMeta& meta, const std::vector<NamedTensor>& tensors,
                           Deadline deadline) {
  std::vector<TensorSpec> specs;
  for (const auto& t : tensors)
    specs.push_back({t.name, ToWireDType(t.tensor.scalar_type()), t.tensor.sizes().vec()});
  WriteSlot slot = ring_.BeginWrite(meta, specs, deadline);
  torch::NoGradGuard no_grad;
  // One thread: glibc's memcpy is the fastest single-thread copy (for large
  // blocks it streams with non-temporal stores, 1.7x ATen's copy_ at 256 MiB
  // on the benchmark machine, docs/BENCHMARKS.md). More threads: ATen's copy_
  // splits the copy across them.
  const bool plain_copy = at::get_num_threads() == 1;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const torch::Tensor& src = tensors[i].tensor;
    if (plain_copy && src.device().is_cpu() && src.is_contiguous()) {
      std::memcpy(slot.tensor_data[i], src.data_ptr(), src.nbytes());
      continue;
    }
    torch::from_blob(slot.tensor_data[i], src.sizes(),
                     torch::TensorOptions().dtype(src.scalar_type()))
        .copy_(src.detach());
  }
  ring_.Commit(slot);
}

TensorMessage ShmTensorReceiver::Receive(Deadline deadline) {
  ReadSlot slot = ring_.Receive(deadline);
  TensorMessage msg;
  msg.meta = slot.meta;
  msg.seq = slot.seq;
  for (size_t i = 0; i < slot.tensors.size(); ++i) {
    const TensorEntry& e = slot.tensors[i];
    std::vector<int64_t> shape(e.shape, e.shape + e.ndim);
    torch::Tensor view = torch::from_blob(const_cast<void*>(slot.tensor_data[i]), shape,
                                          torch::TensorOptions().dtype(FromWireDType(e.dtype)));
    msg.tensors.push_back({std::string(e.name), view});
  }
  held_.push_back(std::move(slot));
  return msg;
}

void ShmTensorReceiver::Release(const TensorMessage& message) {
  auto it = std::find_if(held_.begin(), held_.end(),
                         [&](const ReadSlot& s) { return s.seq == message.seq; });
  if (it == held_.end())
    throw UsageError("Release of a message (seq " + std::to_string(message.seq) + ") not held");
  ring_.Release(*it);
  held_.erase(it);
}

}  // namespace up::ipc
