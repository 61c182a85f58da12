// The turn runner: runs the phases of one step (or of a validation pass) in
// the stage processes by the control protocol. For each phase it takes each
// turn's device lock, grants the turn (a Turn message, with every stage's
// grad norms when the turn steps under global norms), lets the next phase's
// parked stage prefetch, then collects the TurnDone reports, releasing the
// locks and folding each report into its stage's figures: busy time, memory
// peaks, grad norms, the time each process held its turns, and each device's
// total (checked against train.memory_budget on CUDA).
//
// It owns no process: it talks to the stages through a StageGroup, so a test
// can play the stages' side on plain control channels. Not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/config/config.h"
#include "ipc/control_protocol.h"
#include "ipc/schedule.h"
#include "launcher/device_lock.h"
#include "launcher/pipeline_checks.h"
#include "launcher/stage_link.h"

namespace up {

// Every stage's grad norms in the whole model's order (the encoder's half,
// then the decoder's), each stage's placed by the positions its Hello gave;
// those of `stepping` may be missing (0 then): it steps in the turn of its
// last backward and puts its own in. Only `replica`'s stages count (the
// copies' norms are equal: their gradients were summed alike). `norms` by
// process index. RuntimeError when a stage reported a count of norms other
// than its parameters'.
std::vector<float> AllNorms(const PipelineLayout& layout, const std::vector<StageLink>& stages,
                            const std::vector<std::vector<float>>& norms, int stepping,
                            int replica);

class TurnRunner {
 public:
  // Called with each process's report once its figures hold it.
  using OnReport = std::function<void(int process, const ipc::TurnReport& report)>;

  // `config`, `plan` and `stages` (plan.processes() of them, handshaken)
  // must outlive it.
  TurnRunner(const Config& config, const PipelinePlan& plan, StageGroup& stages);

  // Forgets the last step's norms and held times.
  void BeginStep();
  // Runs the phases of `phases` for step `step` (0-based) in the first
  // `replicas` copies of the pipeline at once, each copy's turns the
  // schedule's. A stage that fails, dies or does not answer within
  // pipeline.timeout_s ends it with an error naming the stage and its turn.
  void Run(int64_t step, const std::vector<ChainPhase>& phases, int replicas,
           const OnReport& on_report);

  // Seconds each process held its turns since BeginStep, by process index.
  const std::vector<double>& held_s() const { return held_s_; }
  // The most tensor bytes each device (a lock key) held at once so far.
  const std::map<std::string, int64_t>& device_peak() const { return device_peak_; }

 private:
  // Grants the turns of `phase`; returns the processes now computing and
  // sets `doing` to what they do ("encoder turn [F0 F1] of step 3, ...").
  std::vector<int> Grant(int64_t step, const ChainPhase& phase, int replicas, std::string* doing);
  // pipeline.prefetch: the next phase's parked stages start loading their
  // state now, while `waiting` computes.
  void Prefetch(const ChainPhase& next, int replicas, const std::vector<int>& waiting,
                const std::string& doing);
  void Collect(std::vector<int> waiting, const std::string& doing, const OnReport& on_report);
  void Fold(StageLink& s, const ipc::TurnReport& report);
  // The device's total after `active`'s turn: the turn's own peak plus what
  // the other stages on it hold (their residue while parked).
  void NoteDeviceTotal(StageLink& active, const std::string& during);

  const Config& config_;
  const PipelinePlan& plan_;
  StageGroup& stages_;
  DeviceLocks locks_;
  std::vector<std::vector<float>> norms_;  // this step's, per process
  std::vector<double> held_s_;             // time each process held its turns this step
  std::vector<int64_t> turn_start_us_;     // per process: when its turn was granted
  std::vector<std::string> turn_text_;     // per process: its turn, for messages and the trace
  std::map<std::string, int64_t> device_peak_;
};

}  // namespace up
