// See ipv4_address.h.
#include "ipc/ipv4_address.h"

#include <netdb.h>
#include <sys/socket.h>

#include <cstring>

#include "common/base/errors.h"

namespace up::ipc {

sockaddr_in ResolveIpv4(const std::string& host, int port, const std::string& what) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rc != 0 || found == nullptr) {
    throw UsageError(what + " '" + host + "' does not resolve to an IPv4 address (" +
                     ::gai_strerror(rc) + "); give an address such as 127.0.0.1");
  }
  sockaddr_in addr{};
  std::memcpy(&addr, found->ai_addr, sizeof(addr));
  ::freeaddrinfo(found);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  return addr;
}

}  // namespace up::ipc
