// Arbitrary bytes from a peer on a control socket: ControlChannel's frame
// parser (the bytes arrive through a real socketpair, in one piece) and then
// every message decoder on each frame it accepts. Anything but an up::Error
// (a crash, a huge allocation, another exception) is a finding.
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "common/base/errors.h"
#include "ipc/control_channel.h"
#include "ipc/control_protocol.h"

namespace {

using namespace up::ipc;

void DecodeAny(const ControlMessage& m) {
  switch (static_cast<MsgType>(m.type)) {
    case MsgType::kHello:
      DecodeHello(m);
      break;
    case MsgType::kReject:
      DecodeReject(m);
      break;
    case MsgType::kTurn:
      DecodeTurn(m);
      break;
    case MsgType::kTurnDone:
      DecodeTurnDone(m);
      break;
    case MsgType::kSave:
      DecodeSave(m);
      break;
    case MsgType::kSaved:
      DecodeSaved(m);
      break;
    case MsgType::kBye:
      DecodeBye(m);
      break;
    case MsgType::kFailed:
      DecodeFailed(m);
      break;
    default:
      ExpectType(m, MsgType::kTurnDone, "fuzz peer");
      break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 60000) return -1;  // stays within one socket buffer
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) __builtin_trap();
  size_t sent = 0;
  while (sent < size) {
    const ssize_t n = send(fds[1], data + sent, size - sent, MSG_NOSIGNAL);
    if (n <= 0) __builtin_trap();
    sent += static_cast<size_t>(n);
  }
  close(fds[1]);  // the peer is gone after its bytes
  ControlChannel channel = ControlChannel::Adopt(fds[0], "fuzz peer");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  try {
    for (;;) {
      const ControlMessage m = channel.Receive(deadline);
      try {
        DecodeAny(m);
      } catch (const up::Error&) {
        // A malformed message: rejected with a message, as it must be.
      }
    }
  } catch (const up::PeerGoneError&) {
    // End of the bytes.
  } catch (const up::TimeoutError&) {
    __builtin_trap();  // the peer closed: Receive must not wait
  } catch (const up::Error&) {
    // A bad frame header: rejected.
  }
  return 0;
}
