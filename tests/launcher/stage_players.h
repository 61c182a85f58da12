// Threads that play the stage processes' side of the control protocol, for
// in-process tests of the launcher's turn runner and step loop: each holds
// one end of a socketpair whose other end is its StageLink's control
// channel, and answers as stage/stage_worker.cpp does: a Turn with a
// TurnDone (what the test's `answer` says), a Save by writing the file and
// answering Saved, a Prefetch with nothing, a Finish with Bye. The Turns
// and Prefetches received are recorded in the order they arrive.
//
// Destruction closes the launcher's side (the StageGroup) first, so each
// player's Receive sees its peer gone and the thread ends; then joins them.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ipc/control_channel.h"
#include "ipc/control_protocol.h"
#include "launcher/pipeline_checks.h"
#include "launcher/stage_link.h"

namespace up::stage_players {

// A Turn, Prefetch or Save as one player received it.
struct Received {
  int process = 0;
  ipc::MsgType type = ipc::MsgType::kTurn;
  ipc::TurnRequest turn;  // kTurn
  int64_t save_step = 0;  // kSave
};

// What a player answers to a Turn: a report, or (with `failure`) a Failed
// message, after which it stops as a failing stage does.
struct Answer {
  ipc::TurnReport report;
  std::optional<ipc::Failure> failure;
  bool silent = false;  // no answer at all (a stage that hangs)
};
using Answerer = std::function<Answer(int process, const ipc::TurnRequest& turn)>;

class StagePlayers {
 public:
  // One player per process of `plan`, with the links UnstartedStageLinks
  // makes and `positions[stage]` as its parameter positions (as its Hello
  // would give them).
  StagePlayers(const PipelinePlan& plan, const std::vector<std::vector<int32_t>>& positions,
               Answerer answer);
  ~StagePlayers();
  StagePlayers(const StagePlayers&) = delete;
  StagePlayers& operator=(const StagePlayers&) = delete;

  StageGroup& group() { return *group_; }
  std::vector<Received> received() const;  // in arrival order

 private:
  void Play(int process, ipc::ControlChannel channel);

  Answerer answer_;
  std::unique_ptr<StageGroup> group_;
  mutable std::mutex mu_;
  std::vector<Received> received_;
  std::vector<std::thread> threads_;
};

}  // namespace up::stage_players
