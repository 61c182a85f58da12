// See schedule.h.
#include "launcher/schedule.h"

#include <algorithm>
#include <map>

#include "common/base/errors.h"
#include "launcher/chain_schedule.h"

namespace up {
namespace {

using ipc::Action;
using ipc::Op;

}  // namespace

const char* StageName(StageId stage) { return stage == StageId::kEncoder ? "encoder" : "decoder"; }

ScheduleKind ParseScheduleKind(const std::string& name) {
  if (name == "sequential") return ScheduleKind::kSequential;
  if (name == "gpipe") return ScheduleKind::kGPipe;
  if (name == "1f1b") return ScheduleKind::k1F1B;
  throw UsageError("pipeline.schedule = " + name + ": expected sequential, gpipe or 1f1b");
}

std::vector<Phase> StepSchedule(ScheduleKind kind, int m, bool global_norms) {
  // The two-stage case of the chain's schedule (chain_schedule.h): stage 0
  // is the encoder, stage 1 the decoder.
  std::vector<Phase> phases;
  for (const ChainPhase& c : ChainSchedule(kind, 2, m, global_norms)) {
    Phase p;
    for (const ChainTurn& t : c.turns)
      p.turns.push_back({t.stage == 0 ? StageId::kEncoder : StageId::kDecoder, t.actions});
    phases.push_back(std::move(p));
  }
  return phases;
}

std::string ValidateSchedule(const std::vector<Phase>& phases, int m, bool global_norms) {
  // Position of each action: (phase, index within its turn). Concurrent turns
  // order only through the rings, so a dependency inside one phase is met
  // when the consumer waits for the producer's message.
  std::map<std::string, int> phase_of;
  std::map<std::string, int> count;
  int last_backward_phase[2] = {-1, -1};
  int step_phase[2] = {-1, -1};
  for (size_t p = 0; p < phases.size(); ++p) {
    for (const Turn& turn : phases[p].turns) {
      const int s = static_cast<int>(turn.stage);
      bool stepped = false;
      for (const Action& a : turn.actions) {
        const std::string key = std::string(StageName(turn.stage)) + ":" + ipc::ActionName(a);
        if (stepped) return key + " after the step";
        ++count[key];
        phase_of[ipc::ActionName(a)] = static_cast<int>(p);
        if (a.op == Op::kStep) {
          step_phase[s] = static_cast<int>(p);
          stepped = true;
        }
        if (a.op == Op::kBackward || a.op == Op::kForwardBackward)
          last_backward_phase[s] = static_cast<int>(p);
        const bool encoder_op = a.op == Op::kForward || a.op == Op::kBackward;
        const bool decoder_op = a.op == Op::kForwardBackward;
        if ((turn.stage == StageId::kEncoder && decoder_op) ||
            (turn.stage == StageId::kDecoder && encoder_op)) {
          return key + " is not an action of that stage";
        }
      }
    }
  }
  for (int i = 0; i < m; ++i) {
    for (const char* name : {"encoder:F", "decoder:FB", "encoder:B"}) {
      if (count[name + std::to_string(i)] != 1)
        return std::string(name) + std::to_string(i) + " not exactly once";
    }
    const std::string f = "F" + std::to_string(i), fb = "FB" + std::to_string(i),
                      b = "B" + std::to_string(i);
    if (phase_of[fb] < phase_of[f]) return fb + " before " + f;
    if (phase_of[b] < phase_of[fb]) return b + " before " + fb;
  }
  for (int s = 0; s < 2; ++s) {
    const std::string stage = s == 0 ? "encoder" : "decoder";
    if (count[stage + ":S"] != 1) return stage + " does not step exactly once";
    if (step_phase[s] < last_backward_phase[s]) return stage + " steps before its own backward";
    if (global_norms && step_phase[s] <= last_backward_phase[1 - s]) {
      return stage +
             " steps before the other stage's backward is complete (clipping needs both norms)";
    }
  }
  return "";
}

int EncoderMaxInFlight(const std::vector<Phase>& phases) {
  int in_flight = 0, most = 0;
  for (const Phase& phase : phases) {
    for (const Turn& turn : phase.turns) {
      if (turn.stage != StageId::kEncoder) continue;
      for (const ipc::Action& a : turn.actions) {
        if (a.op == Op::kForward) most = std::max(most, ++in_flight);
        if (a.op == Op::kBackward) --in_flight;
      }
    }
  }
  return most;
}

std::string DescribeSchedule(const std::vector<Phase>& phases) {
  std::string out;
  for (const Phase& phase : phases) {
    if (!out.empty()) out += " ";
    for (size_t t = 0; t < phase.turns.size(); ++t) {
      if (t) out += "|";
      out += phase.turns[t].stage == StageId::kEncoder ? "E[" : "D[";
      out += ipc::ActionsText(phase.turns[t].actions) + "]";
    }
  }
  return out;
}

std::vector<Phase> ValidationSchedule(int64_t batches, int per_turn, bool overlapped) {
  auto actions = [](ipc::Op op, int64_t first, int64_t last) {
    std::vector<ipc::Action> out;
    for (int64_t v = first; v < last; ++v) out.push_back({op, static_cast<int32_t>(v)});
    return out;
  };
  std::vector<Phase> phases;
  if (batches <= 0) return phases;
  if (overlapped) {
    phases.push_back({{{StageId::kEncoder, actions(ipc::Op::kValForward, 0, batches)},
                       {StageId::kDecoder, actions(ipc::Op::kValPredict, 0, batches)}}});
    return phases;
  }
  const int64_t k = std::max(per_turn, 1);
  for (int64_t first = 0; first < batches; first += k) {
    const int64_t last = std::min(batches, first + k);
    phases.push_back({{{StageId::kEncoder, actions(ipc::Op::kValForward, first, last)}}});
    phases.push_back({{{StageId::kDecoder, actions(ipc::Op::kValPredict, first, last)}}});
  }
  return phases;
}

}  // namespace up
