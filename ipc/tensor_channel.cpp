// See tensor_channel.h.
#include "ipc/tensor_channel.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "common/base/errors.h"

namespace up::ipc {

namespace {

// Every dtype that may cross the boundary, in both spellings.
constexpr std::pair<c10::ScalarType, DType> kWireDTypes[] = {
    {torch::kFloat32, DType::kFloat32},   {torch::kFloat16, DType::kFloat16},
    {torch::kBFloat16, DType::kBFloat16}, {torch::kFloat64, DType::kFloat64},
    {torch::kInt64, DType::kInt64},       {torch::kInt32, DType::kInt32},
    {torch::kUInt8, DType::kUInt8},
};

}  // namespace

DType ToWireDType(c10::ScalarType type) {
  for (const auto& [torch_type, wire] : kWireDTypes)
    if (torch_type == type) return wire;
  throw UsageError(std::string("tensor dtype ") + c10::toString(type) +
                   " cannot cross the boundary");
}

c10::ScalarType FromWireDType(DType type) {
  for (const auto& [torch_type, wire] : kWireDTypes)
    if (wire == type) return torch_type;
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
