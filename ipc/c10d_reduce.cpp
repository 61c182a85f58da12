// See c10d_reduce.h.
#include "ipc/c10d_reduce.h"

#include <chrono>

#include "common/base/errors.h"

namespace up::ipc {
namespace {

void Finish(const c10::intrusive_ptr<c10d::Work>& work, double timeout_s, const std::string& what,
            const char* collective) {
  try {
    work->wait(std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
  } catch (const std::exception& e) {
    std::string reason = e.what();
    reason = reason.substr(0, reason.find('\n'));
    throw TimeoutError(what + ": the " + collective + " did not complete within " +
                       std::to_string(static_cast<int>(timeout_s + 0.5)) +
                       " s (pipeline.timeout_s): " + reason);
  }
}

}  // namespace

void OrderedAllReduceSum(c10d::Backend& group, torch::Tensor& flat, double timeout_s,
                         const std::string& what) {
  const int64_t ranks = group.getSize();
  if (ranks == 1) return;
  TORCH_CHECK(flat.dim() == 1 && flat.is_contiguous(), "OrderedAllReduceSum: a flat tensor");
  if (ranks == 2) {
    // x_0 + x_1 == x_1 + x_0 in IEEE arithmetic: any all-reduce of two adds
    // each element once, in the one order there is. The backend's own is
    // the fastest (one collective, no staging).
    std::vector<torch::Tensor> both{flat};
    Finish(group.allreduce(both), timeout_s, what, "all-reduce");
    return;
  }
  const int64_t n = flat.numel();
  const int64_t chunk = (n + ranks - 1) / ranks;
  torch::Tensor padded = flat;  // (ranks * chunk,)
  if (chunk * ranks != n)
    padded = torch::cat({flat, torch::zeros({chunk * ranks - n}, flat.options())});
  // Rank k receives every rank's chunk k, row r from rank r.
  torch::Tensor gathered = torch::empty({ranks * chunk}, flat.options());  // (ranks * chunk,)
  std::vector<int64_t> even;                                               // equal splits
  Finish(group.alltoall_base(gathered, padded, even, even), timeout_s, what, "all-to-all");
  torch::Tensor rows = gathered.view({ranks, chunk});  // (ranks, chunk)
  torch::Tensor sum = rows[0].clone();                 // (chunk,)
  for (int64_t r = 1; r < ranks; ++r) sum.add_(rows[r]);
  std::vector<torch::Tensor> in{sum};
  std::vector<std::vector<torch::Tensor>> out(1);
  torch::Tensor whole = torch::empty({ranks * chunk}, flat.options());  // (ranks * chunk,)
  for (int64_t r = 0; r < ranks; ++r) out[0].push_back(whole.narrow(0, r * chunk, chunk));
  // The backend writes each gathered chunk into its view of `whole`.
  Finish(group.allgather(out, in), timeout_s, what, "all-gather");
  flat.copy_(whole.narrow(0, 0, n));
}

}  // namespace up::ipc
