// The control plane's messages between the launcher and a stage, over a
// ControlChannel (one Unix socket per stage). The launcher drives; a stage
// only answers:
//
//   stage -> launcher  Hello      protocol version, stage name, pid, config
//                                 hash, boundary signature (checked before work)
//   launcher -> stage  Welcome    go ahead (or Reject: reason, then close);
//                                 a flag says the stage file to resume from
//                                 follows as FileChunks (a stage on another node)
//   launcher -> stage  Turn       the stage holds its device: run these actions
//   stage -> launcher  TurnDone   busy time, loss and Dice counts, grad norms
//   launcher -> stage  Save       write the stage file of step N to a path
//   stage -> launcher  Saved      (a stage on another node first sends the
//                                 stage file itself as FileChunks)
//   launcher -> stage  Prefetch   start moving the parked state back to the
//                                 device; the Turn follows (no answer)
//   launcher -> stage  Finish     stage answers Bye and exits 0
//   stage -> launcher  Failed     exit code and one-line message, then exits
//
// Encode*/Decode* are the only code that knows the byte layout; Decode*
// throws up::RuntimeError on a malformed message (never trusts a length).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ipc/control_channel.h"

namespace up::ipc {

// 2: fp16 outcome and tensor bytes in the reports; 3: peaks per phase;
// 4: validation (VF, VP and the report's validation counts), data_wait_s;
// 5: any number of stages (Hello's stage index and parameter positions, a
// step's norms of every stage).
inline constexpr uint32_t kProtocolVersion = 5;

enum class MsgType : uint32_t {
  kHello = 1,
  kWelcome = 2,
  kReject = 3,
  kTurn = 4,
  kTurnDone = 5,
  kSave = 6,
  kSaved = 7,
  kFinish = 8,
  kBye = 9,
  kFailed = 10,
  kFileChunk = 11,
  kPrefetch = 12,
};
const char* MsgTypeName(uint32_t type);

// What a stage does in a turn, one micro-batch at a time.
enum class Op : uint32_t {
  kForward = 1,          // a stage but the last: forward micro-batch m, send its outputs
  kBackward = 2,         // a stage but the last: receive its outputs' gradients, backward
  kForwardBackward = 3,  // the last stage: receive, forward, loss, backward, send grads
  kStep = 4,             // clip (global norm) and step the optimizer
  // Validation, between steps, changing no training state: the action's
  // micro_batch is the index of a batch of the validation plan
  // (common/layout/window_grid.h ValidationPlan).
  kValForward = 5,  // a stage but the last: forward the batch's windows without a graph, send
  kValPredict = 6,  // the last stage: receive, forward, blend; after a case's last batch, count
};
struct Action {
  Op op = Op::kForward;
  int32_t micro_batch = -1;  // -1 for kStep
  bool operator==(const Action& o) const { return op == o.op && micro_batch == o.micro_batch; }
};
std::string ActionName(const Action& action);  // "F3", "B0", "FB1", "S", "VF2", "VP2"
// A turn's actions, space-separated: "FB0 FB1 S".
std::string ActionsText(const std::vector<Action>& actions);

struct Hello {
  uint32_t protocol = kProtocolVersion;
  std::string stage;  // its key: "encoder", "decoder", "decoder2" (pipeline_layout.h)
  int64_t pid = 0;
  std::string config_sha256;
  std::string boundary_signature;
  // Where each of the stage's parameters stands in its whole half's order:
  // the launcher puts the stages' grad norms together in that order.
  std::vector<int32_t> parameter_positions;
};

struct TurnRequest {
  int64_t step = 0;  // 0-based optimizer step
  std::vector<Action> actions;
  // For kStep with clipping or fp16: every stage's grad norms, in the whole
  // model's parameter order (the encoder's, then the decoder's).
  std::vector<float> all_norms;
};

struct TurnReport {
  int64_t step = 0;
  double busy_s = 0;                 // time spent computing in this turn
  double loss = 0;                   // decoder: sum of scaled micro-batch losses this turn
  std::vector<int64_t> dice_counts;  // decoder: Dice counts this turn (empty otherwise)
  std::vector<float> norms;          // this stage's grad norms, once its backward is complete
  int64_t rss_bytes = 0;             // current resident set size
  int64_t device_peak_bytes = 0;     // peak device memory so far (0 on CPU)
  // After S under fp16: the loss scale this step used and whether the step
  // was skipped (a gradient not finite in some stage). 0 / false otherwise.
  double loss_scale = 0;
  bool skipped = false;
  // This stage's tensor bytes on its device (tensor_accounting.h): live at
  // the turn's end and the peak within the turn.
  int64_t tensor_bytes = 0;
  int64_t turn_peak_tensor_bytes = 0;
  // The peak of the turn's forward/backward work, and of its optimizer step
  // (0 without S): what `plan` extrapolates, each on its own line.
  int64_t compute_peak_tensor_bytes = 0;
  int64_t step_peak_tensor_bytes = 0;
  // Decoder, VP: each validation case completed in this turn, in plan
  // order, as ValidationCounts (TP, FP, FN per entry), one after another.
  std::vector<int64_t> val_counts;
  int64_t val_cases = 0;   // how many cases val_counts holds
  double data_wait_s = 0;  // time this turn waited for its micro-batches (batch_loader.h)
};

struct SaveRequest {
  int64_t step = 0;
  std::string path;  // file to write (in the launcher's staging folder)
};

struct Failure {
  int32_t exit_code = 1;
  std::string message;
};

ControlMessage Encode(const Hello& m);
// `state_follows`: the stage file to load comes next, as FileChunks.
ControlMessage EncodeWelcome(bool state_follows = false);
bool DecodeWelcome(const ControlMessage& m);  // state_follows
ControlMessage EncodeReject(const std::string& reason);
ControlMessage Encode(const TurnRequest& m);
ControlMessage Encode(const TurnReport& m);
ControlMessage Encode(const SaveRequest& m);
ControlMessage EncodeSaved(int64_t step);
ControlMessage EncodeFinish();
ControlMessage EncodePrefetch();
struct ByeReport {
  int64_t peak_rss_bytes = 0;
  int64_t device_peak_bytes = 0;
  int64_t peak_tensor_bytes = 0;    // the most tensor bytes on the stage's device at once
  int64_t peak_reserved_bytes = 0;  // CUDA: the caching allocator's peak reserve (CPU: = tensor)
};
ControlMessage Encode(const ByeReport& m);
ControlMessage Encode(const Failure& m);

Hello DecodeHello(const ControlMessage& m);
std::string DecodeReject(const ControlMessage& m);
TurnRequest DecodeTurn(const ControlMessage& m);
TurnReport DecodeTurnDone(const ControlMessage& m);
SaveRequest DecodeSave(const ControlMessage& m);
int64_t DecodeSaved(const ControlMessage& m);
ByeReport DecodeBye(const ControlMessage& m);
Failure DecodeFailed(const ControlMessage& m);

// A file crossing the control connection (a stage file between nodes), in
// chunks of at most kFileChunkBytes; the last one says so.
inline constexpr size_t kFileChunkBytes = 8 << 20;
struct FileChunk {
  bool last = false;
  std::string bytes;
};
ControlMessage Encode(const FileChunk& m);
FileChunk DecodeFileChunk(const ControlMessage& m);
// Sends the file at `path` as FileChunks. RuntimeError if it cannot be read.
void SendFile(ControlChannel& channel, const std::string& path);
// Writes FileChunks from `channel` to `path` (created or truncated, fsynced)
// until the last one. `max_bytes` bounds the total (RuntimeError beyond it).
void ReceiveFile(ControlChannel& channel, const std::string& path, uint64_t max_bytes,
                 ControlChannel::Deadline deadline);

// Throws RuntimeError naming both types when `m` is not of type `expected`
// (a Failed message becomes a RuntimeError carrying the peer's message).
void ExpectType(const ControlMessage& m, MsgType expected, const std::string& peer);

}  // namespace up::ipc
