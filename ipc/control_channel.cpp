// ControlChannel / ControlListener implementation (see control_channel.h):
// poll(2) for every wait so deadlines hold, a growable read buffer that is
// never zero-filled, sendmsg with MSG_NOSIGNAL so a dead peer is an error and
// not a SIGPIPE, and plain std::filesystem for the run directory helpers.
#include "ipc/control_channel.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <thread>

#include "common/base/errors.h"
#include "ipc/ipv4_address.h"

namespace up::ipc {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kReadChunk = 64 * 1024;
// A buffer grown past this for a large frame is freed once it drains.
constexpr size_t kKeepCapacity = 1 << 20;
constexpr size_t kMaxPrefix = 64;
constexpr int kListenBacklog = 16;

std::string ErrnoText(int err) { return std::strerror(err); }

// Milliseconds until `deadline`, rounded up, clamped to [0, INT_MAX].
int PollTimeoutMs(Clock::time_point deadline) {
  const auto left = deadline - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::min<int64_t>(ms, INT_MAX));
}

// "<n> ms": the limit a wait ran under (rounded), for timeout messages.
std::string LimitText(Clock::time_point start, Clock::time_point deadline) {
  const auto ms = std::chrono::round<std::chrono::milliseconds>(deadline - start).count();
  return std::to_string(std::max<int64_t>(ms, 0)) + " ms";
}

sockaddr_un MakeAddress(const std::string& path) {
  sockaddr_un addr{};
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    throw UsageError("control socket path '" + path + "' is " + std::to_string(path.size()) +
                     " bytes; a Unix socket path must be 1 to " +
                     std::to_string(sizeof(addr.sun_path) - 1) +
                     " bytes (use a short directory, e.g. one from MakePrivateRunDir)");
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  return addr;
}

// "tcp:HOST:PORT" -> host, port; false when `endpoint` is not of that form.
bool SplitTcpEndpoint(const std::string& endpoint, std::string* host, int* port) {
  if (endpoint.rfind("tcp:", 0) != 0) return false;
  const size_t colon = endpoint.rfind(':');
  if (colon <= 4) throw UsageError("control endpoint '" + endpoint + "' must be tcp:HOST:PORT");
  *host = endpoint.substr(4, colon - 4);
  const std::string digits = endpoint.substr(colon + 1);
  char* end = nullptr;
  const long value = std::strtol(digits.c_str(), &end, 10);
  if (digits.empty() || *end != '\0' || value < 1 || value > 65535) {
    throw UsageError("control endpoint '" + endpoint + "' has port '" + digits +
                     "'; a port is 1 to 65535");
  }
  *port = static_cast<int>(value);
  return true;
}

template <typename T>
T Load(const char* p) {
  T value;
  std::memcpy(&value, p, sizeof(value));
  return value;
}

}  // namespace

// ---- ControlChannel ----

ControlChannel::ControlChannel(int fd, std::string peer_name)
    : fd_(fd), peer_name_(std::move(peer_name)) {}

ControlChannel ControlChannel::Adopt(int fd, std::string peer_name) {
  if (fd < 0)
    throw UsageError("ControlChannel::Adopt needs an open socket, got fd " + std::to_string(fd));
  return ControlChannel(fd, std::move(peer_name));
}

ControlChannel::ControlChannel(ControlChannel&& other) noexcept { MoveFrom(other); }

ControlChannel& ControlChannel::operator=(ControlChannel&& other) noexcept {
  if (this != &other) {
    Close();
    MoveFrom(other);
  }
  return *this;
}

void ControlChannel::MoveFrom(ControlChannel& other) noexcept {
  fd_ = std::exchange(other.fd_, -1);
  peer_name_ = std::move(other.peer_name_);
  buffer_ = std::move(other.buffer_);
  capacity_ = std::exchange(other.capacity_, 0);
  begin_ = std::exchange(other.begin_, 0);
  end_ = std::exchange(other.end_, 0);
  eof_ = std::exchange(other.eof_, false);
}

ControlChannel::~ControlChannel() { Close(); }

void ControlChannel::Close() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

ControlChannel ControlChannel::Connect(const std::string& socket_path, Deadline deadline) {
  const sockaddr_un addr = MakeAddress(socket_path);
  const auto start = Clock::now();
  for (;;) {
    ControlChannel channel(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), "peer");
    if (channel.fd_ < 0) throw RuntimeError("cannot create a Unix socket: " + ErrnoText(errno));
    if (::connect(channel.fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0) {
      return channel;
    }
    const int err = errno;
    if (err != ENOENT && err != ECONNREFUSED && err != EAGAIN && err != EINTR) {
      throw RuntimeError("cannot connect to control socket " + socket_path + ": " + ErrnoText(err));
    }
    const auto now = Clock::now();
    if (now >= deadline) {
      throw TimeoutError("timed out after " + LimitText(start, deadline) +
                         " waiting for a listener on control socket " + socket_path + " (" +
                         ErrnoText(err) + "); is the process that listens there running?");
    }
    std::this_thread::sleep_for(
        std::min<Clock::duration>(std::chrono::milliseconds(10), deadline - now));
  }
}

ControlChannel ControlChannel::ConnectTo(const std::string& endpoint, Deadline deadline) {
  std::string host;
  int port = 0;
  if (!SplitTcpEndpoint(endpoint, &host, &port)) return Connect(endpoint, deadline);
  const sockaddr_in addr = ResolveIpv4(host, port);
  const auto start = Clock::now();
  for (;;) {
    ControlChannel channel(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), "peer");
    if (channel.fd_ < 0) throw RuntimeError("cannot create a TCP socket: " + ErrnoText(errno));
    if (::connect(channel.fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0) {
      const int one = 1;  // control frames are small and answered at once
      ::setsockopt(channel.fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      return channel;
    }
    const int err = errno;
    if (err != ECONNREFUSED && err != EAGAIN && err != EINTR && err != ETIMEDOUT &&
        err != EHOSTUNREACH && err != ENETUNREACH) {
      throw RuntimeError("cannot connect to control endpoint " + endpoint + ": " + ErrnoText(err));
    }
    const auto now = Clock::now();
    if (now >= deadline) {
      throw TimeoutError("timed out after " + LimitText(start, deadline) + " connecting to " +
                         endpoint + " (" + ErrnoText(err) + "); is node 0's launcher running?");
    }
    std::this_thread::sleep_for(
        std::min<Clock::duration>(std::chrono::milliseconds(50), deadline - now));
  }
}

void ControlChannel::Send(const ControlMessage& message) {
  if (message.payload.size() > kMaxControlPayload) {
    throw UsageError("control message of type " + std::to_string(message.type) + " to " +
                     peer_name_ + " has a payload of " + std::to_string(message.payload.size()) +
                     " bytes; the limit is " + std::to_string(kMaxControlPayload) + " bytes");
  }
  if (fd_ < 0) throw UsageError("Send on a closed control channel to " + peer_name_);
  char header[kControlHeaderBytes];
  const uint32_t magic = kControlMagic;
  const uint64_t length = message.payload.size();
  std::memcpy(header, &magic, 4);
  std::memcpy(header + 4, &message.type, 4);
  std::memcpy(header + 8, &length, 8);

  const size_t total = kControlHeaderBytes + message.payload.size();
  size_t sent = 0;
  while (sent < total) {
    iovec iov[2];
    int count = 0;
    if (sent < kControlHeaderBytes) {
      iov[count++] = {header + sent, kControlHeaderBytes - sent};
      iov[count++] = {const_cast<char*>(message.payload.data()), message.payload.size()};
    } else {
      const size_t done = sent - kControlHeaderBytes;
      iov[count++] = {const_cast<char*>(message.payload.data()) + done,
                      message.payload.size() - done};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = count;
    const ssize_t n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL);
    if (n >= 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    const int err = errno;
    if (err == EINTR) continue;
    if (err == EAGAIN || err == EWOULDBLOCK) {  // a caller made the fd non-blocking
      pollfd p{fd_, POLLOUT, 0};
      ::poll(&p, 1, -1);
      continue;
    }
    if (err == EPIPE || err == ECONNRESET) {
      throw PeerGoneError(peer_name_ + " closed the connection (while sending a message of type " +
                          std::to_string(message.type) + ")");
    }
    throw RuntimeError("cannot send a control message to " + peer_name_ + ": " + ErrnoText(err));
  }
}

bool ControlChannel::TakeFrame(ControlMessage* out) {
  const size_t avail = end_ - begin_;
  if (avail < kControlHeaderBytes) return false;
  const char* p = buffer_.get() + begin_;
  const uint32_t magic = Load<uint32_t>(p);
  if (magic != kControlMagic) {
    char text[64];
    std::snprintf(text, sizeof(text), "bad magic 0x%08x (expected 0x%08x)", magic, kControlMagic);
    throw RuntimeError("malformed control message from " + peer_name_ + ": " + text +
                       "; is the peer a unet-pipeline process of the same build?");
  }
  const uint64_t length = Load<uint64_t>(p + 8);
  if (length > kMaxControlPayload) {
    throw RuntimeError("malformed control message from " + peer_name_ + ": payload length " +
                       std::to_string(length) + " exceeds the limit of " +
                       std::to_string(kMaxControlPayload) + " bytes");
  }
  if (avail - kControlHeaderBytes < length) return false;
  out->type = Load<uint32_t>(p + 4);
  out->payload.assign(p + kControlHeaderBytes, static_cast<size_t>(length));
  begin_ += kControlHeaderBytes + static_cast<size_t>(length);
  if (begin_ == end_) {
    begin_ = end_ = 0;
    if (capacity_ > kKeepCapacity) {
      buffer_.reset();
      capacity_ = 0;
    }
  }
  return true;
}

bool ControlChannel::ReadSome() {
  // Room for the rest of the current frame (its length was validated by
  // TakeFrame), and at least one chunk.
  const size_t used = end_ - begin_;
  size_t want = kReadChunk;
  if (used >= kControlHeaderBytes) {
    const size_t total = kControlHeaderBytes + Load<uint64_t>(buffer_.get() + begin_ + 8);
    if (total > used) want = std::max(want, total - used);
  }
  if (capacity_ - end_ < want) {
    if (capacity_ - used >= want) {
      std::memmove(buffer_.get(), buffer_.get() + begin_, used);
    } else {
      const size_t new_capacity = std::max(used + want, capacity_ * 2);
      std::unique_ptr<char[]> grown(new char[new_capacity]);  // not zero-filled
      if (used > 0) std::memcpy(grown.get(), buffer_.get() + begin_, used);
      buffer_ = std::move(grown);
      capacity_ = new_capacity;
    }
    begin_ = 0;
    end_ = used;
  }
  for (;;) {
    const ssize_t n = ::recv(fd_, buffer_.get() + end_, capacity_ - end_, MSG_DONTWAIT);
    if (n > 0) {
      end_ += static_cast<size_t>(n);
      return true;
    }
    if (n == 0) return false;
    const int err = errno;
    if (err == EINTR) continue;
    if (err == EAGAIN || err == EWOULDBLOCK) return true;
    if (err == ECONNRESET) return false;
    throw RuntimeError("cannot read from the control connection to " + peer_name_ + ": " +
                       ErrnoText(err));
  }
}

ControlMessage ControlChannel::Receive(Deadline deadline) {
  const auto start = Clock::now();
  ControlMessage message;
  for (;;) {
    if (TakeFrame(&message)) return message;
    if (eof_) {
      const size_t partial = end_ - begin_;
      if (partial > 0) {
        throw PeerGoneError(peer_name_ + " closed the connection in the middle of a message (" +
                            std::to_string(partial) + " bytes of an incomplete frame received)");
      }
      throw PeerGoneError(peer_name_ + " closed the connection");
    }
    if (fd_ < 0) throw UsageError("Receive on a closed control channel to " + peer_name_);
    if (WaitReadable({fd_}, deadline) < 0) {
      throw TimeoutError("timed out after " + LimitText(start, deadline) +
                         " waiting for a control message from " + peer_name_);
    }
    if (!ReadSome()) eof_ = true;
  }
}

bool ControlChannel::HasData() {
  if (eof_) return true;
  const size_t avail = end_ - begin_;
  if (avail >= kControlHeaderBytes) {
    const uint64_t length = Load<uint64_t>(buffer_.get() + begin_ + 8);
    // A bad header counts too: Receive will report it at once.
    if (Load<uint32_t>(buffer_.get() + begin_) != kControlMagic || length > kMaxControlPayload ||
        avail - kControlHeaderBytes >= length) {
      return true;
    }
  }
  return fd_ >= 0 && WaitReadable({fd_}, Clock::time_point()) == 0;
}

// ---- ControlListener ----

ControlListener ControlListener::Listen(const std::string& socket_path) {
  const sockaddr_un addr = MakeAddress(socket_path);
  ControlListener listener(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), "");
  if (listener.fd_ < 0) throw RuntimeError("cannot create a Unix socket: " + ErrnoText(errno));
  if (::bind(listener.fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int err = errno;
    std::string hint;
    if (err == EADDRINUSE) hint = "; the file exists: use a fresh run directory";
    throw RuntimeError("cannot bind control socket " + socket_path + ": " + ErrnoText(err) + hint);
  }
  listener.path_ = socket_path;  // from here on the destructor unlinks it
  // Owner-only before listen(), so nobody else can connect in between (the
  // directory should be 0700 too; see MakePrivateRunDir).
  if (::chmod(socket_path.c_str(), 0600) != 0 || ::listen(listener.fd_, kListenBacklog) != 0) {
    throw RuntimeError("cannot set up control socket " + socket_path + ": " + ErrnoText(errno));
  }
  return listener;
}

ControlListener ControlListener::ListenTcp(const std::string& host) {
  sockaddr_in addr = ResolveIpv4(host, 0);
  ControlListener listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), "");
  if (listener.fd_ < 0) throw RuntimeError("cannot create a TCP socket: " + ErrnoText(errno));
  socklen_t len = sizeof(addr);
  if (::bind(listener.fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(listener.fd_, kListenBacklog) != 0 ||
      ::getsockname(listener.fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    throw UsageError("cannot listen for stages on " + host + ": " + ErrnoText(errno) +
                     "; --master-addr must be an address of this machine");
  }
  listener.tcp_ = "tcp:" + host + ":" + std::to_string(ntohs(addr.sin_port));
  return listener;
}

ControlListener::ControlListener(ControlListener&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      path_(std::move(other.path_)),
      tcp_(std::move(other.tcp_)) {
  other.path_.clear();
}

ControlListener& ControlListener::operator=(ControlListener&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
    tcp_ = std::move(other.tcp_);
    other.path_.clear();
  }
  return *this;
}

ControlListener::~ControlListener() { Close(); }

void ControlListener::Close() noexcept {
  if (fd_ >= 0) {
    ::close(fd_);
    if (!path_.empty()) ::unlink(path_.c_str());
  }
  fd_ = -1;
  path_.clear();
}

ControlChannel ControlListener::Accept(Deadline deadline) {
  const auto start = Clock::now();
  for (;;) {
    if (WaitReadable({fd_}, deadline) < 0) {
      throw TimeoutError("timed out after " + LimitText(start, deadline) +
                         " waiting for a connection on control socket " + endpoint());
    }
    // The accepted socket is blocking: accept4 does not inherit O_NONBLOCK.
    const int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) {
      if (!tcp_.empty()) {
        const int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      }
      return ControlChannel::Adopt(fd, "peer");
    }
    const int err = errno;
    if (err == EINTR || err == EAGAIN || err == EWOULDBLOCK || err == ECONNABORTED ||
        err == EPROTO) {
      continue;
    }
    throw RuntimeError("cannot accept on control socket " + path_ + ": " + ErrnoText(err));
  }
}

// ---- Free functions ----

int WaitReadable(const std::vector<int>& fds, std::chrono::steady_clock::time_point deadline) {
  std::vector<pollfd> polled(fds.size());
  for (size_t i = 0; i < fds.size(); ++i) polled[i] = {fds[i], POLLIN, 0};
  for (;;) {
    const int ready = ::poll(polled.data(), polled.size(), PollTimeoutMs(deadline));
    if (ready < 0) {
      if (errno == EINTR) continue;
      throw RuntimeError("poll failed: " + ErrnoText(errno));
    }
    for (size_t i = 0; i < polled.size(); ++i) {
      if (polled[i].revents & POLLNVAL) {
        throw UsageError("WaitReadable: fd " + std::to_string(fds[i]) + " is not open");
      }
      if (polled[i].revents & (POLLIN | POLLHUP | POLLERR)) return static_cast<int>(i);
    }
    if (Clock::now() >= deadline) return -1;
  }
}

std::string MakePrivateRunDir(const std::string& prefix) {
  if (prefix.empty() || prefix.size() > kMaxPrefix || prefix.find('/') != std::string::npos) {
    throw UsageError("run directory prefix '" + prefix + "' is invalid; use 1 to " +
                     std::to_string(kMaxPrefix) + " characters without '/'");
  }
  std::string path = "/tmp/" + prefix + "-XXXXXX";
  if (::mkdtemp(path.data()) == nullptr) {  // mode 0700
    throw RuntimeError("cannot create a private directory " + path + ": " + ErrnoText(errno));
  }
  return path;
}

void RemoveTree(const std::string& path) noexcept {
  if (path.empty()) return;
  try {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  } catch (...) {  // best-effort (only bad_alloc can get here)
  }
}

}  // namespace up::ipc
