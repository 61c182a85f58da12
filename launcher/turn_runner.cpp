// See turn_runner.h.
#include "launcher/turn_runner.h"

#include <algorithm>
#include <chrono>

#include "common/base/byte_size.h"
#include "common/base/deadline.h"
#include "common/base/errors.h"
#include "common/base/logging.h"
#include "common/base/test_hooks.h"
#include "common/base/trace.h"
#include "common/device/out_of_memory.h"

namespace up {
namespace {

using Clock = std::chrono::steady_clock;

std::string TurnText(const StageLink& s, int64_t step, const ChainTurn& turn) {
  return s.key + " turn [" + ipc::ActionsText(turn.actions) + "] of step " +
         std::to_string(step + 1);
}

}  // namespace

std::vector<float> AllNorms(const PipelineLayout& layout, const std::vector<StageLink>& stages,
                            const std::vector<std::vector<float>>& norms, int stepping,
                            int replica) {
  size_t half[2] = {0, 0};
  for (const StageLink& s : stages)
    if (s.replica == replica)
      half[layout.stages[static_cast<size_t>(s.stage)].encoder ? 0 : 1] +=
          s.parameter_positions.size();
  std::vector<float> all(half[0] + half[1], 0.0f);
  for (const StageLink& s : stages) {
    if (s.replica != replica) continue;
    const std::vector<float>& own = norms[static_cast<size_t>(s.index)];
    if (s.index == stepping && own.empty()) continue;
    if (own.size() != s.parameter_positions.size()) {
      throw RuntimeError(Str("the ", s.label, " reported ", own.size(), " gradient norms for its ",
                             s.parameter_positions.size(), " parameters"));
    }
    const size_t offset = layout.stages[static_cast<size_t>(s.stage)].encoder ? 0 : half[0];
    for (size_t i = 0; i < own.size(); ++i)
      all[offset + static_cast<size_t>(s.parameter_positions[i])] = own[i];
  }
  return all;
}

TurnRunner::TurnRunner(const Config& config, const PipelinePlan& plan, StageGroup& stages)
    : config_(config),
      plan_(plan),
      stages_(stages),
      locks_(plan.lock_on),
      norms_(static_cast<size_t>(plan.processes())),
      held_s_(static_cast<size_t>(plan.processes()), 0.0),
      turn_start_us_(static_cast<size_t>(plan.processes()), 0),
      turn_text_(static_cast<size_t>(plan.processes())) {}

void TurnRunner::BeginStep() {
  for (auto& n : norms_) n.clear();
  std::fill(held_s_.begin(), held_s_.end(), 0.0);
}

void TurnRunner::Run(int64_t step, const std::vector<ChainPhase>& phases, int replicas,
                     const OnReport& on_report) {
  for (size_t k = 0; k < phases.size(); ++k) {
    std::string doing;
    const std::vector<int> waiting = Grant(step, phases[k], replicas, &doing);
    if (plan_.prefetch && k + 1 < phases.size()) Prefetch(phases[k + 1], replicas, waiting, doing);
    Collect(waiting, doing, on_report);
  }
}

std::vector<int> TurnRunner::Grant(int64_t step, const ChainPhase& phase, int replicas,
                                   std::string* doing) {
  const int S = plan_.stages;
  std::vector<int> waiting;
  for (int r = 0; r < replicas; ++r) {
    for (const ChainTurn& turn : phase.turns) {
      const int id = r * S + turn.stage;
      StageLink& s = stages_[id];
      const std::string text = TurnText(s, step, turn);
      bool acquired;
      {
        TraceSpan lock_wait(trace_event::kLockWait, "lock");
        acquired = locks_.TryAcquire(s.device, id);
      }
      if (!acquired)
        throw RuntimeError("schedule error: " + s.device + " is held while granting " + text);
      ipc::TurnRequest req{step, turn.actions, {}};
      const bool steps = std::any_of(turn.actions.begin(), turn.actions.end(),
                                     [](const ipc::Action& a) { return a.op == ipc::Op::kStep; });
      if (steps && plan_.global_norms)
        req.all_norms = AllNorms(plan_.layout, stages_.all(), norms_, id, r);
      LogDebug(Str(s.device, " -> ", text));
      // The turn starts when granted: a stage may begin before Send returns.
      turn_start_us_[static_cast<size_t>(id)] = MonotonicMicros();
      stages_.Send(s, ipc::Encode(req), text);
      TestHookPoint("launcher", "turn", step + 1);
      turn_text_[static_cast<size_t>(id)] = text;
      s.turn = text;
      waiting.push_back(id);
      if (!doing->empty()) *doing += ", ";
      *doing += text;
    }
  }
  return waiting;
}

void TurnRunner::Prefetch(const ChainPhase& next, int replicas, const std::vector<int>& waiting,
                          const std::string& doing) {
  for (int r = 0; r < replicas; ++r) {
    for (const ChainTurn& turn : next.turns) {
      const int id = r * plan_.stages + turn.stage;
      if (std::find(waiting.begin(), waiting.end(), id) == waiting.end())
        stages_.Send(stages_[id], ipc::EncodePrefetch(), doing);
    }
  }
}

void TurnRunner::Collect(std::vector<int> waiting, const std::string& doing,
                         const OnReport& on_report) {
  const auto phase_start = Clock::now();
  while (!waiting.empty()) {
    auto [id, m] = stages_.Await(waiting, After(config_.pipeline.timeout_s), doing);
    const ipc::TurnReport report = ipc::DecodeTurnDone(m);
    StageLink& s = stages_[id];
    s.turn.clear();
    const size_t i = static_cast<size_t>(id);
    locks_.Release(s.device, id);
    TraceComplete(std::string(trace_event::kTurnHeld) + ": " + turn_text_[i], "turn",
                  turn_start_us_[i], MonotonicMicros());
    waiting.erase(std::find(waiting.begin(), waiting.end(), id));
    Fold(s, report);
    NoteDeviceTotal(s, turn_text_[i]);
    held_s_[i] += std::chrono::duration<double>(Clock::now() - phase_start).count();
    if (!report.norms.empty()) norms_[i] = report.norms;
    on_report(id, report);
  }
}

void TurnRunner::Fold(StageLink& s, const ipc::TurnReport& report) {
  s.busy_s += report.busy_s;
  s.rss_bytes = report.rss_bytes;
  s.device_peak_bytes = std::max(s.device_peak_bytes, report.device_peak_bytes);
  s.tensor_bytes = report.tensor_bytes;
  s.peak_tensor_bytes = std::max(s.peak_tensor_bytes, report.turn_peak_tensor_bytes);
  s.turn_peak_tensor_bytes = report.turn_peak_tensor_bytes;
  s.residue_tensor_bytes = std::max(s.residue_tensor_bytes, report.tensor_bytes);
  s.compute_peak_tensor_bytes =
      std::max(s.compute_peak_tensor_bytes, report.compute_peak_tensor_bytes);
  s.step_peak_tensor_bytes = std::max(s.step_peak_tensor_bytes, report.step_peak_tensor_bytes);
}

void TurnRunner::NoteDeviceTotal(StageLink& active, const std::string& during) {
  const int64_t budget = config_.train.memory_budget;
  int64_t total = active.turn_peak_tensor_bytes;
  std::string others;
  for (StageLink& o : stages_.all()) {
    if (&o == &active || o.device != active.device) continue;
    total += o.tensor_bytes;
    others += Str(", the ", o.label, " holding ", FormatBytes(o.tensor_bytes));
  }
  int64_t& peak = device_peak_[active.device];
  peak = std::max(peak, total);
  // A CPU device enforces the budget as it allocates; on CUDA each process's
  // cap is the whole budget, so the stages' sum is checked here, a turn at a time.
  if (plan_.device[static_cast<size_t>(active.stage)].is_cuda() && budget > 0 && total > budget) {
    throw RuntimeError(
        Str("out of memory on ", active.device, " during ", during, ": the ", active.label,
            "'s turn peaked at ", FormatBytes(active.turn_peak_tensor_bytes), others, ", past the ",
            FormatBytes(budget), " train.memory_budget; ", FitSuggestions(config_, false)));
  }
}

}  // namespace up
