// The backward of a pipeline part from the gradients its downstream parts
// sent back, holding on the device only what the running unit needs:
//   - the outputs' values are let go before the backward runs: autograd needs
//     only the place each gradient enters the graph (its edge), and a value
//     the graph still needs is kept by the graph itself;
//   - a gradient enters the device (`to_device`) only when autograd reaches
//     its output, where the output feeds exactly one more operation of the
//     part (a skip, which the part's next level also takes): it is added to
//     that operation's gradient just before the output's own backward runs.
//     Any other output is a root of the backward, its gradient on the device
//     from the start.
// The sums are the ones autograd forms when every gradient is a root (two
// terms, added in either order, give the same floats), so training equals
// the plain backward bit for bit. On a CPU device `to_device` makes the copy
// the budget counts (activation_parking.h); on a GPU it is the copy in.
#pragma once

#include <torch/csrc/autograd/edge.h>
#include <torch/torch.h>

#include <functional>
#include <vector>

namespace up {

using ToDevice = std::function<torch::Tensor(const torch::Tensor&)>;

// An output's place in the graph, without its value: what a part keeps of
// the outputs it sent between its forward and its backward.
struct OutputEdge {
  torch::autograd::Edge edge;
  std::vector<int64_t> sizes;
};
// `output`'s edge; it must require grad.
OutputEdge EdgeOf(const torch::Tensor& output);

// Backpropagates `grads[i]` (where they lie) into `outputs[i]`. An output
// listed twice (a tensor sent to two parts) has its gradients summed in the
// order given.
void PartBackward(const std::vector<OutputEdge>& outputs, const std::vector<torch::Tensor>& grads,
                  const ToDevice& to_device);
// The same from the output tensors, which it clears first (their values go).
void PartBackward(std::vector<torch::Tensor>* outputs, const std::vector<torch::Tensor>& grads,
                  const ToDevice& to_device);

}  // namespace up
