// See control_protocol.h.
#include "ipc/control_protocol.h"

#include <climits>
#include <fstream>

#include "common/base/errors.h"
#include "common/base/fs_util.h"
#include "ipc/wire.h"

namespace up::ipc {
namespace {

ControlMessage Message(MsgType type, std::string payload = "") {
  return ControlMessage{static_cast<uint32_t>(type), std::move(payload)};
}

void Check(const ControlMessage& m, MsgType type) {
  if (m.type != static_cast<uint32_t>(type)) {
    throw RuntimeError(std::string("control: expected a ") +
                       MsgTypeName(static_cast<uint32_t>(type)) + " message, got " +
                       MsgTypeName(m.type));
  }
}

}  // namespace

const char* MsgTypeName(uint32_t type) {
  switch (static_cast<MsgType>(type)) {
    case MsgType::kHello:
      return "Hello";
    case MsgType::kWelcome:
      return "Welcome";
    case MsgType::kReject:
      return "Reject";
    case MsgType::kTurn:
      return "Turn";
    case MsgType::kTurnDone:
      return "TurnDone";
    case MsgType::kSave:
      return "Save";
    case MsgType::kSaved:
      return "Saved";
    case MsgType::kFinish:
      return "Finish";
    case MsgType::kBye:
      return "Bye";
    case MsgType::kFailed:
      return "Failed";
    case MsgType::kFileChunk:
      return "FileChunk";
    case MsgType::kPrefetch:
      return "Prefetch";
  }
  return "unknown";
}

std::string ActionName(const Action& a) {
  switch (a.op) {
    case Op::kForward:
      return "F" + std::to_string(a.micro_batch);
    case Op::kBackward:
      return "B" + std::to_string(a.micro_batch);
    case Op::kForwardBackward:
      return "FB" + std::to_string(a.micro_batch);
    case Op::kStep:
      return "S";
    case Op::kValForward:
      return "VF" + std::to_string(a.micro_batch);
    case Op::kValPredict:
      return "VP" + std::to_string(a.micro_batch);
  }
  return "?";
}

std::string ActionsText(const std::vector<Action>& actions) {
  std::string out;
  for (const Action& a : actions) out += (out.empty() ? "" : " ") + ActionName(a);
  return out;
}

ControlMessage Encode(const Hello& m) {
  WireWriter w;
  w.U32(m.protocol).Str(m.stage).I64(m.pid).Str(m.config_sha256).Str(m.boundary_signature);
  std::vector<int64_t> positions(m.parameter_positions.begin(), m.parameter_positions.end());
  w.I64Vec(positions);
  return Message(MsgType::kHello, w.Take());
}

Hello DecodeHello(const ControlMessage& m) {
  Check(m, MsgType::kHello);
  WireReader r(m.payload, "Hello message");
  Hello h;
  h.protocol = r.U32();
  if (h.protocol != kProtocolVersion) return h;  // the rest may be laid out differently
  h.stage = r.Str();
  h.pid = r.I64();
  h.config_sha256 = r.Str();
  h.boundary_signature = r.Str();
  for (int64_t p : r.I64Vec()) {
    if (p < 0 || p > INT32_MAX)
      throw RuntimeError("Hello message: parameter position " + std::to_string(p));
    h.parameter_positions.push_back(static_cast<int32_t>(p));
  }
  r.ExpectDone();
  return h;
}

ControlMessage EncodeWelcome(bool state_follows) {
  WireWriter w;
  w.U32(state_follows ? 1 : 0);
  return Message(MsgType::kWelcome, w.Take());
}
bool DecodeWelcome(const ControlMessage& m) {
  Check(m, MsgType::kWelcome);
  WireReader r(m.payload, "Welcome message");
  const uint32_t flags = r.U32();
  r.ExpectDone();
  if (flags > 1) throw RuntimeError("malformed Welcome message: flags " + std::to_string(flags));
  return flags == 1;
}
ControlMessage EncodeReject(const std::string& reason) {
  WireWriter w;
  w.Str(reason);
  return Message(MsgType::kReject, w.Take());
}
std::string DecodeReject(const ControlMessage& m) {
  Check(m, MsgType::kReject);
  WireReader r(m.payload, "Reject message");
  std::string reason = r.Str();
  r.ExpectDone();
  return reason;
}

ControlMessage Encode(const TurnRequest& m) {
  WireWriter w;
  w.I64(m.step).U32(static_cast<uint32_t>(m.actions.size()));
  for (const Action& a : m.actions) w.U32(static_cast<uint32_t>(a.op)).I64(a.micro_batch);
  w.F32Vec(m.all_norms);
  return Message(MsgType::kTurn, w.Take());
}

TurnRequest DecodeTurn(const ControlMessage& m) {
  Check(m, MsgType::kTurn);
  WireReader r(m.payload, "Turn message");
  TurnRequest t;
  t.step = r.I64();
  const uint32_t n = r.U32();
  if (n > r.remaining() / 12)
    throw RuntimeError("malformed Turn message: action count " + std::to_string(n));
  for (uint32_t i = 0; i < n; ++i) {
    Action a;
    const uint32_t op = r.U32();
    if (op < 1 || op > 6)
      throw RuntimeError("malformed Turn message: unknown op " + std::to_string(op));
    a.op = static_cast<Op>(op);
    a.micro_batch = static_cast<int32_t>(r.I64());
    t.actions.push_back(a);
  }
  t.all_norms = r.F32Vec();
  r.ExpectDone();
  return t;
}

ControlMessage Encode(const TurnReport& m) {
  WireWriter w;
  w.I64(m.step)
      .F64(m.busy_s)
      .F64(m.loss)
      .I64Vec(m.dice_counts)
      .F32Vec(m.norms)
      .I64(m.rss_bytes)
      .I64(m.device_peak_bytes)
      .F64(m.loss_scale)
      .U32(m.skipped ? 1 : 0)
      .I64(m.tensor_bytes)
      .I64(m.turn_peak_tensor_bytes)
      .I64(m.compute_peak_tensor_bytes)
      .I64(m.step_peak_tensor_bytes)
      .I64Vec(m.val_counts)
      .I64(m.val_cases)
      .F64(m.data_wait_s);
  return Message(MsgType::kTurnDone, w.Take());
}

TurnReport DecodeTurnDone(const ControlMessage& m) {
  Check(m, MsgType::kTurnDone);
  WireReader r(m.payload, "TurnDone message");
  TurnReport t;
  t.step = r.I64();
  t.busy_s = r.F64();
  t.loss = r.F64();
  t.dice_counts = r.I64Vec();
  t.norms = r.F32Vec();
  t.rss_bytes = r.I64();
  t.device_peak_bytes = r.I64();
  t.loss_scale = r.F64();
  t.skipped = r.U32() != 0;
  t.tensor_bytes = r.I64();
  t.turn_peak_tensor_bytes = r.I64();
  t.compute_peak_tensor_bytes = r.I64();
  t.step_peak_tensor_bytes = r.I64();
  t.val_counts = r.I64Vec();
  t.val_cases = r.I64();
  t.data_wait_s = r.F64();
  if (t.val_cases < 0 || (t.val_cases == 0) != t.val_counts.empty() ||
      (t.val_cases > 0 && t.val_counts.size() % static_cast<size_t>(t.val_cases) != 0)) {
    throw RuntimeError("malformed TurnDone message: " + std::to_string(t.val_counts.size()) +
                       " validation counts for " + std::to_string(t.val_cases) + " cases");
  }
  r.ExpectDone();
  return t;
}

ControlMessage Encode(const SaveRequest& m) {
  WireWriter w;
  w.I64(m.step).Str(m.path);
  return Message(MsgType::kSave, w.Take());
}
SaveRequest DecodeSave(const ControlMessage& m) {
  Check(m, MsgType::kSave);
  WireReader r(m.payload, "Save message");
  SaveRequest s;
  s.step = r.I64();
  s.path = r.Str();
  r.ExpectDone();
  return s;
}

ControlMessage EncodeSaved(int64_t step) {
  WireWriter w;
  w.I64(step);
  return Message(MsgType::kSaved, w.Take());
}
int64_t DecodeSaved(const ControlMessage& m) {
  Check(m, MsgType::kSaved);
  WireReader r(m.payload, "Saved message");
  const int64_t step = r.I64();
  r.ExpectDone();
  return step;
}

ControlMessage EncodeFinish() { return Message(MsgType::kFinish); }
ControlMessage Encode(const ByeReport& m) {
  WireWriter w;
  w.I64(m.peak_rss_bytes)
      .I64(m.device_peak_bytes)
      .I64(m.peak_tensor_bytes)
      .I64(m.peak_reserved_bytes);
  return Message(MsgType::kBye, w.Take());
}
ByeReport DecodeBye(const ControlMessage& m) {
  Check(m, MsgType::kBye);
  WireReader r(m.payload, "Bye message");
  ByeReport b;
  b.peak_rss_bytes = r.I64();
  b.device_peak_bytes = r.I64();
  b.peak_tensor_bytes = r.I64();
  b.peak_reserved_bytes = r.I64();
  r.ExpectDone();
  return b;
}

ControlMessage Encode(const Failure& m) {
  WireWriter w;
  w.U32(static_cast<uint32_t>(m.exit_code)).Str(m.message);
  return Message(MsgType::kFailed, w.Take());
}
Failure DecodeFailed(const ControlMessage& m) {
  Check(m, MsgType::kFailed);
  WireReader r(m.payload, "Failed message");
  Failure f;
  f.exit_code = static_cast<int32_t>(r.U32());
  f.message = r.Str();
  r.ExpectDone();
  return f;
}

void ExpectType(const ControlMessage& m, MsgType expected, const std::string& peer) {
  if (m.type == static_cast<uint32_t>(expected)) return;
  if (m.type == static_cast<uint32_t>(MsgType::kFailed)) {
    const Failure f = DecodeFailed(m);
    if (f.exit_code == 2) throw UsageError(peer + ": " + f.message);
    throw RuntimeError(peer + " failed: " + f.message);
  }
  throw RuntimeError("protocol error: " + peer + " sent " + MsgTypeName(m.type) + " where " +
                     MsgTypeName(static_cast<uint32_t>(expected)) + " was expected");
}

ControlMessage EncodePrefetch() { return Message(MsgType::kPrefetch); }

ControlMessage Encode(const FileChunk& m) {
  WireWriter w;
  w.U32(m.last ? 1 : 0).Str(m.bytes);
  return Message(MsgType::kFileChunk, w.Take());
}
FileChunk DecodeFileChunk(const ControlMessage& m) {
  Check(m, MsgType::kFileChunk);
  WireReader r(m.payload, "FileChunk message");
  FileChunk c;
  const uint32_t last = r.U32();
  c.bytes = r.Str();
  r.ExpectDone();
  if (last > 1)
    throw RuntimeError("malformed FileChunk message: last flag " + std::to_string(last));
  if (c.bytes.size() > kFileChunkBytes) {
    throw RuntimeError("malformed FileChunk message: " + std::to_string(c.bytes.size()) +
                       " bytes, the limit is " + std::to_string(kFileChunkBytes));
  }
  c.last = last == 1;
  return c;
}

void SendFile(ControlChannel& channel, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw RuntimeError("cannot read " + path + " to send it to " + channel.peer_name());
  FileChunk chunk;
  do {
    chunk.bytes.resize(kFileChunkBytes);
    in.read(chunk.bytes.data(), static_cast<std::streamsize>(chunk.bytes.size()));
    chunk.bytes.resize(static_cast<size_t>(in.gcount()));
    chunk.last = in.eof();
    if (in.bad()) throw RuntimeError("cannot read " + path + ": I/O error");
    channel.Send(Encode(chunk));
  } while (!chunk.last);
}

void ReceiveFile(ControlChannel& channel, const std::string& path, uint64_t max_bytes,
                 ControlChannel::Deadline deadline) {
  std::string data;
  for (;;) {
    const ControlMessage m = channel.Receive(deadline);
    ExpectType(m, MsgType::kFileChunk, channel.peer_name());
    FileChunk chunk = DecodeFileChunk(m);
    if (data.size() + chunk.bytes.size() > max_bytes) {
      throw RuntimeError(channel.peer_name() + " sent a file of more than " +
                         std::to_string(max_bytes) + " bytes for " + path);
    }
    data += chunk.bytes;
    if (chunk.last) break;
  }
  WriteFileAtomic(path, data);
}

}  // namespace up::ipc
