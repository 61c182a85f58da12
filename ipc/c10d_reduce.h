// A sum over a c10d process group whose result does not depend on how the
// backend orders its additions: every rank gets, for each element,
// ((x_0 + x_1) + x_2) + ... in rank order, the same bits whatever the ring or
// tree the backend would have used. Single-process training sums the
// replicas' gradients in the same order (common/training/replica_gradients.h), so
// the two agree bit for bit.
//
// How: the flat tensor (padded to a multiple of the group's size) is cut into
// one chunk per rank; an all-to-all gives rank k every rank's chunk k, which
// it adds up in rank order; an all-gather hands every rank every summed
// chunk. That moves what a ring all-reduce moves (2 (R-1)/R of the tensor in
// and out of each rank), in two collectives. Two ranks need none of it: the
// sum of two does not depend on its order, so they take the backend's own
// all-reduce.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <string>

namespace up::ipc {

// Replaces `flat` (a 1-D contiguous tensor, the same numel on every rank) by
// the group's rank-ordered sum. Gloo needs host tensors, NCCL device ones.
// TimeoutError naming `what` when a peer does not take part within
// `timeout_s`.
void OrderedAllReduceSum(c10d::Backend& group, torch::Tensor& flat, double timeout_s,
                         const std::string& what);

}  // namespace up::ipc
