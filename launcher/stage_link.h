// The launcher's side of the stage processes: each stage's child process and
// control connection, and the one place the launcher waits for them.
//
// Every wait watches all stages at once (their control sockets and their
// pidfds), so the death of any process is seen at once, and ends at a
// deadline with an error that says what was awaited. Not thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/base/child_process.h"
#include "ipc/control_channel.h"
#include "ipc/control_protocol.h"

namespace up {

struct StageLink {
  int index = 0;       // in the group: replica * stages + stage
  int stage = 0;       // in pipeline order
  int replica = 0;     // pipeline.replicas: which copy of the pipeline
  std::string key;     // "encoder", "decoder2": files, logs, the handshake
  std::string label;   // "encoder stage", "decoder part 2 of 3": messages
  std::string device;  // the lock's key: the device, qualified by node when nodes differ
  std::optional<ChildProcess> child;  // none for a stage on another node
  int node = 0;
  std::optional<ipc::ControlChannel> control;
  int64_t peak_rss_bytes = 0;
  int64_t rss_bytes = 0;  // at the last TurnDone
  int64_t device_peak_bytes = 0;
  int64_t tensor_bytes = 0;               // live at the last TurnDone (tensor_accounting.h)
  int64_t peak_tensor_bytes = 0;          // the most at once so far
  int64_t turn_peak_tensor_bytes = 0;     // the most at once in its last turn
  int64_t residue_tensor_bytes = 0;       // the most it held between turns (parked)
  int64_t compute_peak_tensor_bytes = 0;  // the most in forward/backward work
  int64_t step_peak_tensor_bytes = 0;     // the most in an optimizer step
  int64_t peak_reserved_bytes = 0;        // CUDA: the caching allocator's peak reserve
  double busy_s = 0;
  bool finished = false;  // said Bye: its exit is expected, no longer watched
  // The turn it was given and has not answered yet ("encoder.r1 turn [B0 B1
  // S] of step 3"), for a death's message when several turns run at once.
  std::string turn;
  std::vector<int32_t> parameter_positions;  // its Hello's
  const char* name() const { return key.c_str(); }
  bool remote() const { return !child.has_value(); }
};

// For a stage on another node, what its node's launcher saw of its end
// ("killed by signal 9"), waited for briefly; empty when nothing was said.
using RemoteExit = std::function<std::string(const StageLink&)>;

class StageGroup {
 public:
  using Deadline = std::chrono::steady_clock::time_point;

  explicit StageGroup(std::vector<StageLink> stages, RemoteExit remote_exit = {})
      : stages_(std::move(stages)), remote_exit_(std::move(remote_exit)) {}

  StageLink& operator[](int index) { return stages_[static_cast<size_t>(index)]; }
  std::vector<StageLink>& all() { return stages_; }

  // Accepts one connection per stage on `listener` and reads its Hello.
  // Returns the Hellos by stage index. A stage that dies first is reported,
  // naming `doing` ("start-up before step 3").
  std::vector<ipc::Hello> AcceptAll(ipc::ControlListener& listener, Deadline deadline,
                                    const std::string& doing = "start-up");

  // Sends `m` to `stage`; a stage that is gone is reported as Await does.
  void Send(StageLink& stage, const ipc::ControlMessage& m, const std::string& doing);

  // Waits for the next message from any stage in `expected`; a message from
  // another stage, a Failed message, a closed socket or a dead process is an
  // error naming the stage and `doing` ("turn FB0 FB1 of step 3").
  std::pair<int, ipc::ControlMessage> Await(const std::vector<int>& expected, Deadline deadline,
                                            const std::string& doing);

  // Kills every stage still running (SIGKILL) and reaps it.
  void KillAll();

 private:
  [[noreturn]] void ReportGone(StageLink& stage, const std::string& doing);

  std::vector<StageLink> stages_;
  RemoteExit remote_exit_;
};

}  // namespace up
