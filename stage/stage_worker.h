// What every stage process has in common: its command line, the rings it
// opens, the control connection to the launcher, the handshake, and the loop
// that answers the launcher's messages. A stage (encoder or decoder) plugs in
// as a StageWorker; `encoder_proc/main.cpp` and `decoder_proc/main.cpp` are
// one call to StageMain with their factory.
//
// Stage command line (the launcher builds it; a user can too, for debugging):
//   <stage>_proc --config FILE --control SOCKET --run-id HEX [--part N]
//                --rings PREFIX [--load FILE] [--log FILE] [-v|-q]
//                [--record DIR --record-steps N] [--trace PART_FILE]
// --part N (1-based) picks which of the half's parts (pipeline.encoder_parts,
// pipeline.decoder_parts) the process runs; each channel of the layout that
// touches it is a pair of rings named ChannelRingName(PREFIX, ...).
// A stage alone, without launcher or peer (stage_alone.h):
//   <stage>_proc --replay DIR [--atol A] [--rtol R]
//   <stage>_proc --standalone --config FILE [--set k=v]... [--steps N]
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "common/config/config.h"
#include "common/layout/pipeline_layout.h"
#include "ipc/control_protocol.h"
#include "ipc/tensor_channel.h"
#include "stage/replica_group.h"

namespace up::stage {

class StageWorker {
 public:
  virtual ~StageWorker() = default;
  // Names and shapes of the boundary tensors this stage expects, one line.
  virtual std::string BoundarySignature() const = 0;
  // Where each of its parameters stands in its whole half's order (Hello).
  virtual std::vector<int32_t> ParameterPositions() const { return {}; }
  // How many parameters its whole half has (the length of the gradient-norm
  // list a step takes when it needs every stage's norms); 0 if it trains none.
  virtual int HalfParameters() const { return 0; }
  // Runs the turn's actions in order; the stage holds its device meanwhile.
  virtual ipc::TurnReport RunTurn(const ipc::TurnRequest& turn) = 0;
  // Writes the stage file (weights, buffers, optimizer state, step, RNG).
  virtual void Save(const ipc::SaveRequest& request) = 0;
  // Restores a stage file written by Save (resume).
  virtual void Load(const std::string& path) = 0;
  // Starts moving parked state back to the device before the next turn
  // (pipeline.prefetch); a stage that does not park has nothing to do.
  virtual void Prefetch() {}
  // Off turn, after each turn's report: what the stage can do for its next
  // turns without its device (its next micro-batches' data).
  virtual void Idle() {}
  // The stage's half of the U-Net (recording, replay and test hooks read it).
  virtual torch::nn::Module& module() = 0;
  // pipeline.replicas: joins this stage's copies in the other replicas
  // (replica_group.h), after the handshake; a stage that trains sums its
  // gradients with theirs after each step's last backward.
  virtual void JoinReplicas(const ReplicaGroupOptions&) {}

  // When set (by the recorder), a stage that computes the loss calls it with
  // each micro-batch's scaled loss.
  std::function<void(int64_t step, int micro_batch, double loss)> on_loss;
};

// One channel of the layout, from the stage's side: for a channel into the
// stage, what it receives forward and sends gradients on; for one out of it,
// what it sends forward and receives gradients on.
struct ChannelEnds {
  int channel = 0;  // index into the layout's channels
  ipc::TensorSender* sender = nullptr;
  ipc::TensorReceiver* receiver = nullptr;
};

struct StageContext {
  Config config;
  PipelineLayout layout;
  int stage = 0;                      // this stage's index in the layout
  int replica = 0;                    // which copy of the pipeline (pipeline.replicas)
  std::vector<ChannelEnds> channels;  // every channel into or out of the stage
};

using WorkerFactory = std::function<std::unique_ptr<StageWorker>(const StageContext&)>;

// Parses argv, connects, handshakes, serves the launcher until Finish.
// Returns the exit code: 0, 2 (bad input) or 1 (runtime failure); the error
// line goes to stderr and, as a Failed message, to the launcher.
int StageMain(int argc, char** argv, const std::string& stage_name, const WorkerFactory& factory);

}  // namespace up::stage
