// See part_backward.h.
#include "common/training/part_backward.h"

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>

#include <map>
#include <set>
#include <stdexcept>
#include <utility>

namespace up {
namespace {

using torch::autograd::Edge;
using torch::autograd::Node;
using torch::autograd::variable_list;

// Where a gradient enters the graph: a node and which of its inputs.
using Place = std::pair<Node*, uint32_t>;

// Adds the gradients sent for one output to what the part's own operation
// gave it, as that output's backward is about to run; its copies on the
// device last only as long as the sum takes.
class LateGradient final : public torch::autograd::FunctionPreHook {
 public:
  LateGradient(uint32_t input, std::vector<torch::Tensor> grads, ToDevice to_device)
      : input_(input), grads_(std::move(grads)), to_device_(std::move(to_device)) {}

  variable_list operator()(const variable_list& inputs) override {
    if (grads_.empty()) return inputs;  // a second run of the node: nothing left to add
    torch::Tensor sent = to_device_(grads_[0]);
    for (size_t i = 1; i < grads_.size(); ++i) sent = sent + to_device_(grads_[i]);
    grads_.clear();
    variable_list out = inputs;
    torch::Tensor& mine = out.at(input_);
    mine = mine.defined() ? mine + sent : sent;
    return out;
  }

 private:
  uint32_t input_;
  std::vector<torch::Tensor> grads_;  // where they lie, until the node runs
  ToDevice to_device_;
};

// How many edges of the graph above `starts` lead into each place.
std::map<Place, int> EdgesInto(const std::vector<Edge>& starts) {
  std::map<Place, int> into;
  std::set<Node*> seen;
  std::vector<Node*> todo;
  for (const Edge& e : starts) {
    if (seen.insert(e.function.get()).second) todo.push_back(e.function.get());
  }
  while (!todo.empty()) {
    Node* node = todo.back();
    todo.pop_back();
    for (const Edge& next : node->next_edges()) {
      if (!next.is_valid()) continue;
      ++into[{next.function.get(), next.input_nr}];
      if (seen.insert(next.function.get()).second) todo.push_back(next.function.get());
    }
  }
  return into;
}

}  // namespace

OutputEdge EdgeOf(const torch::Tensor& output) {
  if (!output.requires_grad()) throw std::logic_error("PartBackward: an output has no graph");
  return {torch::autograd::impl::gradient_edge(output), output.sizes().vec()};
}

void PartBackward(std::vector<torch::Tensor>* outputs, const std::vector<torch::Tensor>& grads,
                  const ToDevice& to_device) {
  std::vector<OutputEdge> edges;
  for (const torch::Tensor& out : *outputs) edges.push_back(EdgeOf(out));
  outputs->clear();  // the graph keeps what it needs of their values
  PartBackward(edges, grads, to_device);
}

void PartBackward(const std::vector<OutputEdge>& outputs, const std::vector<torch::Tensor>& grads,
                  const ToDevice& to_device) {
  if (outputs.size() != grads.size())
    throw std::logic_error("PartBackward: " + std::to_string(outputs.size()) + " outputs, " +
                           std::to_string(grads.size()) + " gradients");
  // Each distinct place with its gradients in the order given.
  std::vector<Edge> places;
  std::vector<std::vector<torch::Tensor>> sent;
  std::map<Place, size_t> index;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const OutputEdge& out = outputs[i];
    TORCH_CHECK(grads[i].sizes() == c10::IntArrayRef(out.sizes), "PartBackward: gradient ", i,
                " is ", grads[i].sizes(), ", its output ", c10::IntArrayRef(out.sizes));
    const Place place{out.edge.function.get(), out.edge.input_nr};
    auto [it, added] = index.emplace(place, places.size());
    if (added) {
      places.push_back(out.edge);
      sent.emplace_back();
    }
    sent[it->second].push_back(grads[i]);
  }

  const std::map<Place, int> into = EdgesInto(places);
  torch::autograd::edge_list roots;
  variable_list root_grads;
  for (size_t p = 0; p < places.size(); ++p) {
    const Edge& edge = places[p];
    auto found = into.find({edge.function.get(), edge.input_nr});
    if (found != into.end() && found->second == 1) {
      // Fed to one more operation here: its gradient waits for that one's.
      edge.function->add_pre_hook(
          std::make_unique<LateGradient>(edge.input_nr, std::move(sent[p]), to_device));
      continue;
    }
    for (const torch::Tensor& g : sent[p]) {
      roots.push_back(edge);
      root_grads.push_back(to_device(g));
    }
  }
  torch::autograd::Engine::get_default_engine().execute(roots, root_grads, /*keep_graph=*/false,
                                                        /*create_graph=*/false,
                                                        /*accumulate_grad=*/true);
}

}  // namespace up
