// See schedule.h.
#include "ipc/schedule.h"

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>

#include "common/base/errors.h"

namespace up {
namespace {

using ipc::Action;
using ipc::Op;

Action F(int m) { return {Op::kForward, m}; }
Action B(int m) { return {Op::kBackward, m}; }
Action FB(int m) { return {Op::kForwardBackward, m}; }
Action S() { return {Op::kStep, -1}; }

// What stage `s` of `stages` runs for each micro-batch in a backward pass.
Op BackwardOp(int s, int stages) { return s == stages - 1 ? Op::kForwardBackward : Op::kBackward; }

}  // namespace

ScheduleKind ParseScheduleKind(const std::string& name) {
  if (name == "sequential") return ScheduleKind::kSequential;
  if (name == "gpipe") return ScheduleKind::kGPipe;
  if (name == "1f1b") return ScheduleKind::k1F1B;
  throw UsageError("pipeline.schedule = " + name + ": expected sequential, gpipe or 1f1b");
}

std::vector<ChainPhase> ChainSchedule(ScheduleKind kind, int stages, int m, bool global_norms) {
  if (stages < 2) throw std::invalid_argument("a pipeline has at least 2 stages");
  if (m < 1) throw std::invalid_argument("at least 1 micro-batch");
  const int last = stages - 1;
  std::vector<ChainPhase> phases;
  if (kind == ScheduleKind::kSequential) {
    for (int s = 0; s < last; ++s) {
      ChainTurn t{s, {}};
      for (int i = 0; i < m; ++i) t.actions.push_back(F(i));
      phases.push_back({{t}});
    }
    for (int s = last; s >= 0; --s) {
      ChainTurn t{s, {}};
      for (int i = 0; i < m; ++i) t.actions.push_back({BackwardOp(s, stages), i});
      if (!global_norms || s == 0) t.actions.push_back(S());  // stage 0 has every norm by now
      phases.push_back({{t}});
    }
    if (global_norms) {
      for (int s = 1; s < stages; ++s) phases.push_back({{ChainTurn{s, {S()}}}});
    }
    return phases;
  }
  ChainPhase main;
  for (int s = 0; s < stages; ++s) {
    ChainTurn t{s, {}};
    if (s == last) {
      for (int i = 0; i < m; ++i) t.actions.push_back(FB(i));
    } else if (kind == ScheduleKind::kGPipe) {
      for (int i = 0; i < m; ++i) t.actions.push_back(F(i));
      for (int i = 0; i < m; ++i) t.actions.push_back(B(i));
    } else {  // 1F1B: warm up, then one forward and one backward, then drain
      const int warm = std::min(last - s, m);
      for (int i = 0; i < warm; ++i) t.actions.push_back(F(i));
      for (int i = 0; i < m; ++i) {
        if (i + warm < m) t.actions.push_back(F(i + warm));
        t.actions.push_back(B(i));
      }
    }
    if (!global_norms) t.actions.push_back(S());
    main.turns.push_back(std::move(t));
  }
  phases.push_back(std::move(main));
  if (global_norms) {
    ChainPhase steps;
    for (int s = 0; s < stages; ++s) steps.turns.push_back({s, {S()}});
    phases.push_back(std::move(steps));
  }
  return phases;
}

std::string ValidateChainSchedule(const std::vector<ChainPhase>& phases, int stages, int m,
                                  bool global_norms) {
  const int last = stages - 1;
  // Done actions: (stage, op, micro-batch); backwards done per stage; steps.
  std::set<std::tuple<int, Op, int>> done;
  std::vector<int> backwards(static_cast<size_t>(stages), 0);
  std::vector<bool> stepped(static_cast<size_t>(stages), false);
  auto name = [](int s, const Action& a) { return std::to_string(s) + ":" + ipc::ActionName(a); };
  auto ready = [&](int s, const Action& a) {
    switch (a.op) {
      case Op::kForward:
        return s == 0 || done.count({s - 1, Op::kForward, a.micro_batch}) > 0;
      case Op::kForwardBackward:
        return last == 0 || done.count({last - 1, Op::kForward, a.micro_batch}) > 0;
      case Op::kBackward:
        return done.count({s, Op::kForward, a.micro_batch}) > 0 &&
               done.count({s + 1, BackwardOp(s + 1, stages), a.micro_batch}) > 0;
      case Op::kStep:
        if (backwards[static_cast<size_t>(s)] != m) return false;
        if (global_norms) {
          for (int b : backwards)
            if (b != m) return false;
        }
        return true;
      default:
        return false;
    }
  };
  for (size_t p = 0; p < phases.size(); ++p) {
    const std::vector<ChainTurn>& turns = phases[p].turns;
    std::set<int> seen;
    for (const ChainTurn& t : turns) {
      if (t.stage < 0 || t.stage >= stages) return "a turn of stage " + std::to_string(t.stage);
      if (!seen.insert(t.stage).second)
        return "stage " + std::to_string(t.stage) + " has two turns in phase " + std::to_string(p);
      for (const Action& a : t.actions) {
        const bool own = a.op == Op::kStep || (t.stage == last) == (a.op == Op::kForwardBackward);
        if (!own || a.op == Op::kValForward || a.op == Op::kValPredict)
          return name(t.stage, a) + " is not an action of that stage";
        if (a.op != Op::kStep && (a.micro_batch < 0 || a.micro_batch >= m))
          return name(t.stage, a) + ": no such micro-batch";
      }
    }
    std::vector<size_t> cursor(turns.size(), 0);
    for (bool progress = true; progress;) {
      progress = false;
      for (size_t k = 0; k < turns.size(); ++k) {
        const ChainTurn& t = turns[k];
        while (cursor[k] < t.actions.size() && ready(t.stage, t.actions[cursor[k]])) {
          const Action& a = t.actions[cursor[k]++];
          const size_t s = static_cast<size_t>(t.stage);
          if (stepped[s]) return name(t.stage, a) + " after the stage's step";
          if (a.op == Op::kStep) {
            stepped[s] = true;
          } else if (!done.insert({t.stage, a.op, a.micro_batch}).second) {
            return name(t.stage, a) + " twice";
          }
          if (a.op == Op::kBackward || a.op == Op::kForwardBackward) ++backwards[s];
          progress = true;
        }
      }
    }
    for (size_t k = 0; k < turns.size(); ++k) {
      if (cursor[k] < turns[k].actions.size()) {
        return "phase " + std::to_string(p) +
               " cannot finish: " + name(turns[k].stage, turns[k].actions[cursor[k]]) +
               " waits for an input " + "no earlier action gives";
      }
    }
  }
  for (int s = 0; s < stages; ++s) {
    if (backwards[static_cast<size_t>(s)] != m)
      return "stage " + std::to_string(s) + " runs " +
             std::to_string(backwards[static_cast<size_t>(s)]) + " of " + std::to_string(m) +
             " backwards";
    if (!stepped[static_cast<size_t>(s)]) return "stage " + std::to_string(s) + " never steps";
    if (s < last) {
      for (int i = 0; i < m; ++i)
        if (!done.count({s, Op::kForward, i})) return name(s, F(i)) + " missing";
    }
  }
  return "";
}

int ChainMaxInFlight(const std::vector<ChainPhase>& phases, int stage) {
  int in_flight = 0, most = 0;
  for (const ChainPhase& phase : phases) {
    for (const ChainTurn& t : phase.turns) {
      if (t.stage != stage) continue;
      for (const Action& a : t.actions) {
        if (a.op == Op::kForward || a.op == Op::kForwardBackward)
          most = std::max(most, ++in_flight);
        if (a.op == Op::kBackward || a.op == Op::kForwardBackward) --in_flight;
      }
    }
  }
  return most;
}

std::string DescribeChainSchedule(const std::vector<ChainPhase>& phases,
                                  const std::vector<std::string>& names) {
  std::string out;
  for (const ChainPhase& phase : phases) {
    if (!out.empty()) out += " ";
    for (size_t t = 0; t < phase.turns.size(); ++t) {
      if (t) out += "|";
      const int s = phase.turns[t].stage;
      out += (static_cast<size_t>(s) < names.size() ? names[static_cast<size_t>(s)]
                                                    : std::to_string(s)) +
             "[" + ipc::ActionsText(phase.turns[t].actions) + "]";
    }
  }
  return out;
}

std::vector<std::vector<ipc::Action>> StageTurns(const std::vector<ChainPhase>& phases, int stage) {
  std::vector<std::vector<ipc::Action>> out;
  for (const ChainPhase& phase : phases) {
    for (const ChainTurn& t : phase.turns) {
      if (t.stage == stage) out.push_back(t.actions);
    }
  }
  return out;
}

std::vector<ChainPhase> ChainValidationSchedule(int64_t batches, int per_turn, bool overlapped,
                                                int stages) {
  auto turn = [stages](int s, int64_t first, int64_t last) {
    ChainTurn t{s, {}};
    const Op op = s == stages - 1 ? Op::kValPredict : Op::kValForward;
    for (int64_t v = first; v < last; ++v) t.actions.push_back({op, static_cast<int32_t>(v)});
    return t;
  };
  std::vector<ChainPhase> phases;
  if (batches <= 0) return phases;
  if (overlapped) {
    ChainPhase all;
    for (int s = 0; s < stages; ++s) all.turns.push_back(turn(s, 0, batches));
    phases.push_back(std::move(all));
    return phases;
  }
  const int64_t k = std::max(per_turn, 1);
  for (int64_t first = 0; first < batches; first += k) {
    const int64_t last = std::min(batches, first + k);
    for (int s = 0; s < stages; ++s) phases.push_back({{turn(s, first, last)}});
  }
  return phases;
}

}  // namespace up
