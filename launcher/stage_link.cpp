// See stage_link.h.
#include "launcher/stage_link.h"

#include <algorithm>

#include "common/base/errors.h"

namespace up {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kPollSlice = std::chrono::milliseconds(500);

double SecondsLeft(Clock::time_point since, Clock::time_point until) {
  return std::chrono::duration<double>(until - since).count();
}

}  // namespace

void StageGroup::ReportGone(StageLink& stage, const std::string& doing) {
  if (stage.remote()) {
    const std::string seen = remote_exit_ ? remote_exit_(stage) : "";
    throw RuntimeError(stage.label + " on node " + std::to_string(stage.node) + " " +
                       (seen.empty() ? "closed its connection" : seen) + " during " +
                       (stage.turn.empty() ? doing : stage.turn));
  }
  // Give the process a moment to finish dying so its status is known.
  ExitStatus status = stage.child->Wait(Clock::now() + std::chrono::seconds(2));
  StageLink* culprit = &stage;
  if (status.exited) {
    // A stage that exited may only have noticed that its peer died (the
    // rings see a dead peer): a peer killed by a signal is the cause.
    for (auto& other : stages_) {
      if (&other == &stage || other.finished || !other.child) continue;
      const std::optional<ExitStatus> o = other.child->Poll();
      if (o && !o->exited) {
        culprit = &other;
        status = *o;
      }
    }
  }
  throw RuntimeError(culprit->label + " " + status.Describe() + " during " +
                     (culprit->turn.empty() ? doing : culprit->turn));
}

std::vector<ipc::Hello> StageGroup::AcceptAll(ipc::ControlListener& listener, Deadline deadline,
                                              const std::string& doing) {
  std::vector<ipc::Hello> hellos(stages_.size());
  std::vector<std::optional<ipc::ControlChannel>> pending;
  size_t greeted = 0;
  const auto start = Clock::now();
  while (greeted < stages_.size()) {
    for (auto& s : stages_) {
      if (s.child && s.child->Poll()) ReportGone(s, doing);
    }
    std::vector<int> fds{listener.fd()};
    for (auto& p : pending) fds.push_back(p ? p->fd() : -1);
    for (auto& s : stages_) fds.push_back(s.child ? s.child->pidfd() : -1);
    const int ready = ipc::WaitReadable(fds, std::min(deadline, Clock::now() + kPollSlice));
    if (ready < 0) {
      if (Clock::now() >= deadline) {
        std::string missing;
        for (const auto& s : stages_) {
          if (s.control) continue;
          missing += (missing.empty() ? "" : " and ") + s.key +
                     (s.remote() ? " (node " + std::to_string(s.node) + ")" : "");
        }
        const bool remote = std::any_of(stages_.begin(), stages_.end(), [](const StageLink& s) {
          return s.remote() && !s.control;
        });
        throw TimeoutError(
            missing + " did not connect and say hello within " +
            std::to_string(static_cast<int>(SecondsLeft(start, deadline) + 0.5)) + " s during " +
            doing + " (pipeline.timeout_s); " +
            (remote ? "start the launcher on that node with the same --config, --nnodes, "
                      "--master-addr and --master-port and its --node-rank"
                    : "see the stage logs in the run folder"));
      }
      continue;
    }
    if (ready == 0) {
      pending.emplace_back(listener.Accept(deadline));
      continue;
    }
    const size_t p = static_cast<size_t>(ready - 1);
    if (p >= pending.size() || !pending[p]) continue;  // a pidfd: handled by Poll above
    ipc::ControlMessage m;
    try {
      m = pending[p]->Receive(deadline);
    } catch (const PeerGoneError&) {
      pending[p].reset();  // its process died: its pidfd reports it above
      continue;
    }
    ipc::ExpectType(m, ipc::MsgType::kHello, "a stage");
    ipc::Hello hello = ipc::DecodeHello(m);
    auto it = std::find_if(stages_.begin(), stages_.end(),
                           [&](const StageLink& s) { return hello.stage == s.key; });
    if (it == stages_.end() || it->control) {
      throw RuntimeError("handshake: unexpected stage '" + hello.stage + "' (pid " +
                         std::to_string(hello.pid) + ")");
    }
    pending[p]->set_peer_name(it->name());
    it->control.emplace(std::move(*pending[p]));
    pending[p].reset();
    hellos[static_cast<size_t>(it->index)] = hello;
    ++greeted;
  }
  return hellos;
}

std::pair<int, ipc::ControlMessage> StageGroup::Await(const std::vector<int>& expected,
                                                      Deadline deadline, const std::string& doing) {
  const auto start = Clock::now();
  for (;;) {
    // Buffered messages first, in stage order.
    for (auto& s : stages_) {
      if (s.finished || !s.control || !s.control->HasData()) continue;
      ipc::ControlMessage m;
      try {
        m = s.control->Receive(deadline);
      } catch (const PeerGoneError&) {
        ReportGone(s, doing);
      }
      if (std::find(expected.begin(), expected.end(), s.index) == expected.end() ||
          m.type == static_cast<uint32_t>(ipc::MsgType::kFailed)) {
        ipc::ExpectType(m, ipc::MsgType::kTurnDone,
                        std::string(s.name()) + " (during " + doing + ")");
        throw RuntimeError(std::string("protocol error: ") + s.name() + " sent " +
                           ipc::MsgTypeName(m.type) + " out of turn during " + doing);
      }
      return {s.index, std::move(m)};
    }
    std::vector<int> fds;
    for (auto& s : stages_) fds.push_back(s.control && !s.finished ? s.control->fd() : -1);
    for (auto& s : stages_) fds.push_back(s.finished || !s.child ? -1 : s.child->pidfd());
    const int ready = ipc::WaitReadable(fds, std::min(deadline, Clock::now() + kPollSlice));
    if (ready >= static_cast<int>(stages_.size())) {
      StageLink& s = stages_[ready - stages_.size()];
      // A stage that failed cleanly has sent its reason first: read it.
      if (s.control && s.control->HasData()) continue;
      ReportGone(s, doing);
    }
    if (ready < 0 && Clock::now() >= deadline) {
      std::string who;
      for (int i : expected)
        who += (who.empty() ? "" : " and ") + stages_[static_cast<size_t>(i)].key;
      throw TimeoutError(who + " did not answer within " +
                         std::to_string(static_cast<int>(SecondsLeft(start, deadline) + 0.5)) +
                         " s during " + doing +
                         " (pipeline.timeout_s; raise it where a turn computes longer)");
    }
  }
}

void StageGroup::Send(StageLink& stage, const ipc::ControlMessage& m, const std::string& doing) {
  try {
    stage.control->Send(m);
  } catch (const PeerGoneError&) {
    ReportGone(stage, doing);
  }
}

void StageGroup::KillAll() {
  for (auto& s : stages_) {
    if (!s.child) {
      s.control.reset();  // a stage on another node stops when its connection closes
    } else if (!s.child->Poll()) {
      s.child->Kill(SIGKILL);
      s.child->Wait(Clock::now() + std::chrono::seconds(5));
    }
  }
}

}  // namespace up
