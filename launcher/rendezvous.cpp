// See rendezvous.h.
#include "launcher/rendezvous.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <cstring>
#include <sstream>

#include "common/base/errors.h"
#include "ipc/ipv4_address.h"

namespace up {
namespace {

std::chrono::milliseconds Ms(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(std::max(seconds, 0.001) * 1000));
}

std::string FirstLine(const std::exception& e) {
  const auto* c10 = dynamic_cast<const c10::Error*>(&e);
  std::string what = c10 ? c10->what_without_backtrace() : e.what();
  return what.substr(0, what.find('\n'));
}

}  // namespace

std::string RunAnnouncement::Encode() const {
  return run_id + " " + control + " " + config_sha256 + " " + (resume ? "1" : "0");
}

RunAnnouncement RunAnnouncement::Decode(const std::string& text) {
  std::istringstream in(text);
  RunAnnouncement a;
  std::string resume;
  if (!(in >> a.run_id >> a.control >> a.config_sha256 >> resume) ||
      (resume != "0" && resume != "1")) {
    throw RuntimeError("malformed run announcement from node 0: '" + text + "'");
  }
  a.resume = resume == "1";
  return a;
}

struct Rendezvous::Impl {
  c10::intrusive_ptr<c10d::TCPStore> store;
};

Rendezvous::Rendezvous(std::unique_ptr<Impl> impl, std::string host, int port)
    : impl_(std::move(impl)), host_(std::move(host)), port_(port) {}
Rendezvous::Rendezvous(Rendezvous&&) noexcept = default;
Rendezvous& Rendezvous::operator=(Rendezvous&&) noexcept = default;
Rendezvous::~Rendezvous() = default;

Rendezvous Rendezvous::Serve(const std::string& host, int port, double timeout_s) {
  // Bind here, on the configured address only, and hand the socket over.
  const sockaddr_in want = ipc::ResolveIpv4(host, port, "--master-addr");
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw RuntimeError(std::string("cannot create a socket: ") + std::strerror(errno));
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in bound = want;
  socklen_t len = sizeof(bound);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&want), sizeof(want)) != 0 ||
      ::listen(fd, 64) != 0 || ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
    const int err = errno;
    ::close(fd);
    throw UsageError("cannot serve the rendezvous on " + host + ":" + std::to_string(port) + ": " +
                     std::strerror(err) +
                     (err == EADDRINUSE ? "; pick a free --master-port" : "; check --master-addr"));
  }
  const int actual = ntohs(bound.sin_port);
  c10d::TCPStoreOptions o;
  o.port = static_cast<uint16_t>(actual);
  o.isServer = true;
  o.waitWorkers = false;
  o.timeout = Ms(timeout_s);
  o.masterListenFd = fd;
  auto impl = std::make_unique<Impl>();
  try {
    impl->store = c10::make_intrusive<c10d::TCPStore>(host, o);
  } catch (const std::exception& e) {
    throw RuntimeError("cannot start the rendezvous store on " + host + ":" +
                       std::to_string(actual) + ": " + FirstLine(e));
  }
  return Rendezvous(std::move(impl), host, actual);
}

Rendezvous Rendezvous::Join(const std::string& host, int port, double timeout_s) {
  c10d::TCPStoreOptions o;
  o.port = static_cast<uint16_t>(port);
  o.isServer = false;
  o.waitWorkers = false;
  o.timeout = Ms(timeout_s);
  auto impl = std::make_unique<Impl>();
  try {
    impl->store = c10::make_intrusive<c10d::TCPStore>(host, o);
  } catch (const std::exception& e) {
    throw TimeoutError("node 0 did not answer at " + host + ":" + std::to_string(port) +
                       " within " + std::to_string(static_cast<int>(timeout_s)) +
                       " s (pipeline.timeout_s): start node 0's launcher with the same "
                       "--master-addr/--master-port (" +
                       FirstLine(e) + ")");
  }
  return Rendezvous(std::move(impl), host, port);
}

void Rendezvous::Set(const std::string& key, const std::string& value) {
  try {
    impl_->store->set(key, std::vector<uint8_t>(value.begin(), value.end()));
  } catch (const std::exception& e) {
    throw PeerGoneError("the rendezvous store at " + address() + " is gone: " + FirstLine(e));
  }
}

std::optional<std::string> Rendezvous::Get(const std::string& key, double timeout_s) {
  try {
    impl_->store->wait({key}, Ms(timeout_s));
  } catch (const std::exception& e) {
    const std::string why = FirstLine(e);
    if (why.find("imeout") != std::string::npos || why.find("imed out") != std::string::npos)
      return std::nullopt;
    throw PeerGoneError("the rendezvous store at " + address() + " is gone: " + why);
  }
  try {
    const std::vector<uint8_t> v = impl_->store->get(key);
    return std::string(v.begin(), v.end());
  } catch (const std::exception& e) {
    throw PeerGoneError("the rendezvous store at " + address() + " is gone: " + FirstLine(e));
  }
}

std::string LocalAddressToward(const std::string& peer) {
  // connect() on a UDP socket sends nothing; it only picks the route.
  const sockaddr_in to = ipc::ResolveIpv4(peer, 9, "--master-addr");
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in local{};
  socklen_t len = sizeof(local);
  const bool ok = fd >= 0 &&
                  ::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof(to)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0;
  const int err = errno;
  if (fd >= 0) ::close(fd);
  if (!ok) {
    throw RuntimeError("no route from this machine to " + peer + ": " + std::strerror(err) +
                       "; give --node-addr");
  }
  char text[INET_ADDRSTRLEN];
  ::inet_ntop(AF_INET, &local.sin_addr, text, sizeof(text));
  return text;
}

}  // namespace up
