// What a stage's debugging options observe while the launcher drives it:
//
//   StageRecorder (--record DIR --record-steps N): for the first N steps this
//     process runs, the boundary messages it SENDS on each of its channels
//     (forward tensors downstream, their gradients upstream; receivers record
//     nothing), the losses (the last stage), the norms its optimizer step was given, and its
//     weights at the start of each recorded step and after the last one (as a
//     torch.load-able `.pt` and as a `.stage` file replay starts from).
//     Layout: common/run/recording_format.h. Each stage appends its own index
//     lines to DIR/<stage>.jsonl; the launcher merges them into index.json.
//   ObservedSender / ObservedReceiver: decorators over a transport that emit
//     trace events for each send and receive (--trace) and hand sent messages
//     to the recorder.
//   ApplyTestHooks: UP_TEST_PERTURB_DECODER=1 (a TEST HOOK, for `check`'s
//     tests) makes the decoder add 1e-3 to one weight after loading, so the
//     pipeline silently diverges from single-process training.
// One thread per stage; not thread-safe.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "stage/stage_worker.h"

namespace up::stage {

class StageRecorder {
 public:
  // `channels`: how many the layout has (more than one: files name theirs).
  StageRecorder(std::string dir, std::string stage, int steps, size_t channels);

  // Weights at the start of the turn's step (once per step) and, for a turn
  // that steps the optimizer, the norms it carries.
  void BeforeTurn(StageWorker& worker, const ipc::TurnRequest& turn);
  // After a turn that stepped the optimizer: the weights at the next step's start.
  void AfterTurn(StageWorker& worker, const ipc::TurnRequest& turn);
  void Sent(int channel, const ipc::MessageMeta& meta,
            const std::vector<ipc::NamedTensor>& tensors);
  void Loss(int64_t step, int micro_batch, double loss);

 private:
  bool Recording(int64_t step) const;
  void Snapshot(StageWorker& worker, int64_t step);
  void Append(const std::string& json_line);

  std::string dir_, stage_;
  int steps_;
  size_t channels_;
  int64_t first_ = -1;   // the first step this process ran
  bool paused_ = false;  // in a validation turn: nothing of it is recorded
  std::set<int64_t> snapshots_;
};

class ObservedSender : public ipc::TensorSender {
 public:
  ObservedSender(ipc::TensorSender& inner, StageRecorder* recorder, int channel)
      : inner_(inner), recorder_(recorder), channel_(channel) {}
  void Send(const ipc::MessageMeta& meta, const std::vector<ipc::NamedTensor>& tensors,
            ipc::Deadline deadline) override;

 private:
  ipc::TensorSender& inner_;
  StageRecorder* recorder_;  // may be null
  int channel_;              // the layout's index of the channel it sends on
};

class ObservedReceiver : public ipc::TensorReceiver {
 public:
  explicit ObservedReceiver(ipc::TensorReceiver& inner) : inner_(inner) {}
  ipc::TensorMessage Receive(ipc::Deadline deadline) override;
  void Release(const ipc::TensorMessage& message) override;

 private:
  ipc::TensorReceiver& inner_;
  // Messages read in place and charged as device tensors: (seq, bytes).
  std::vector<std::pair<uint64_t, int64_t>> charged_;
};

void ApplyTestHooks(const std::string& stage, StageWorker& worker);

}  // namespace up::stage
