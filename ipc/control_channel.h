// ControlChannel: framed control messages over a Unix-domain stream socket
// (on one machine) or TCP (across machines), between the launcher and each
// stage process, between the stages, and between the launchers of a
// multi-node run.
//
// A frame is u32 kControlMagic, u32 type, u64 payload length, then the
// payload (little-endian, the host byte order of every machine the project
// builds on: wire.h). A length above
// kMaxControlPayload from the peer is rejected before anything is allocated.
// A peer that closes or dies makes Receive/Send throw PeerGoneError, never
// hang: sockets close when their process dies, so liveness needs no lock.
//
// Ownership: a ControlListener owns its listening fd and its socket file
// (unlinked by its destructor); a ControlChannel owns its connected fd and
// a buffer of bytes read but not yet returned. Both are move-only and not
// thread-safe; one thread may use one object while other threads use others.
// Socket files should live in a directory only the owner can enter
// (MakePrivateRunDir makes one, mode 0700); the socket itself is made 0600.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace up::ipc {

inline constexpr uint32_t kControlMagic = 0x4C544355;  // "UCTL" little-endian
inline constexpr uint64_t kMaxControlPayload = 64ULL << 20;
inline constexpr size_t kControlHeaderBytes = 16;

struct ControlMessage {
  uint32_t type = 0;
  std::string payload;
};

class ControlChannel {
 public:
  using Deadline = std::chrono::steady_clock::time_point;

  // Connects to a ControlListener at `socket_path`, retrying while the file
  // is missing or refuses (the listener may not be up yet). TimeoutError at
  // the deadline; UsageError if the path is too long for a socket address.
  static ControlChannel Connect(const std::string& socket_path, Deadline deadline);
  // Connects to "tcp:HOST:PORT" (a listener on another node, see
  // ControlListener::ListenTcp) or, for anything else, the Unix socket at
  // that path. Retries until the deadline like Connect.
  static ControlChannel ConnectTo(const std::string& endpoint, Deadline deadline);
  // Takes ownership of a connected stream socket (e.g. one end of a
  // socketpair). UsageError if fd < 0.
  static ControlChannel Adopt(int fd, std::string peer_name = "peer");

  ControlChannel(ControlChannel&& other) noexcept;
  ControlChannel& operator=(ControlChannel&& other) noexcept;
  ControlChannel(const ControlChannel&) = delete;
  ControlChannel& operator=(const ControlChannel&) = delete;
  ~ControlChannel();  // closes the fd

  // Writes the whole frame (blocking until the peer's socket buffer takes
  // it). UsageError if the payload exceeds kMaxControlPayload; PeerGoneError
  // if the peer has closed; RuntimeError for other failures.
  void Send(const ControlMessage& message);
  // Returns the next message. TimeoutError at the deadline (naming the peer
  // and the limit); PeerGoneError at end of stream, also in mid-frame;
  // RuntimeError for a bad magic or an oversize length.
  ControlMessage Receive(Deadline deadline);
  // Non-blocking: true if a complete frame is buffered, the peer has
  // closed, or the socket is readable now (Receive then returns or throws
  // promptly, unless only part of a frame has arrived).
  bool HasData();

  int fd() const { return fd_; }
  const std::string& peer_name() const { return peer_name_; }
  void set_peer_name(std::string name) { peer_name_ = std::move(name); }

 private:
  ControlChannel(int fd, std::string peer_name);
  // Validates a buffered header; true and *out filled if a whole frame is
  // buffered (it is then consumed).
  bool TakeFrame(ControlMessage* out);
  // One recv into the buffer; false at end of stream.
  bool ReadSome();
  void Close() noexcept;
  void MoveFrom(ControlChannel& other) noexcept;

  int fd_ = -1;
  std::string peer_name_;
  std::unique_ptr<char[]> buffer_;
  size_t capacity_ = 0;
  size_t begin_ = 0;  // first unread byte
  size_t end_ = 0;    // one past the last buffered byte
  bool eof_ = false;
};

class ControlListener {
 public:
  using Deadline = std::chrono::steady_clock::time_point;

  // Binds and listens at `socket_path` (which must not exist) and makes the
  // socket file mode 0600. UsageError naming the path and the limit if it is
  // too long for sun_path; RuntimeError if bind/listen fail.
  static ControlListener Listen(const std::string& socket_path);
  // Binds and listens on TCP at `host` (an IPv4 address or a name that
  // resolves to one; only that interface) on a port the kernel picks;
  // endpoint() tells it. For stages on other nodes: the frames are the same,
  // in little-endian byte order (every supported machine is little-endian).
  static ControlListener ListenTcp(const std::string& host);

  ControlListener(ControlListener&& other) noexcept;
  ControlListener& operator=(ControlListener&& other) noexcept;
  ControlListener(const ControlListener&) = delete;
  ControlListener& operator=(const ControlListener&) = delete;
  ~ControlListener();  // closes the fd and unlinks the socket file

  // Waits for one connection. TimeoutError at the deadline.
  ControlChannel Accept(Deadline deadline);

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  // What a peer passes to ControlChannel::ConnectTo: the socket path, or
  // "tcp:HOST:PORT".
  std::string endpoint() const { return tcp_.empty() ? path_ : tcp_; }

 private:
  ControlListener(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  void Close() noexcept;

  int fd_ = -1;
  std::string path_;  // Unix socket file (unlinked on close); empty for TCP
  std::string tcp_;   // "tcp:HOST:PORT" for a TCP listener
};

// Polls `fds` for POLLIN/POLLHUP/POLLERR until the deadline; returns the
// index of the first ready fd, or -1 at the deadline (a past deadline still
// checks once). Negative fds are skipped; UsageError for a closed fd.
// Buffered data in a ControlChannel is invisible here: check HasData() first.
int WaitReadable(const std::vector<int>& fds, std::chrono::steady_clock::time_point deadline);

// Creates a fresh directory /tmp/<prefix>-XXXXXX, mode 0700, and returns its
// path. UsageError for an empty prefix or one with '/'; RuntimeError if
// mkdtemp fails.
std::string MakePrivateRunDir(const std::string& prefix);
// Removes `path` and everything below it; best-effort, never throws.
void RemoveTree(const std::string& path) noexcept;

}  // namespace up::ipc
