// One IPv4 address resolution for every socket the project opens across
// machines (the control plane over TCP, the c10d rendezvous).
#pragma once

#include <netinet/in.h>

#include <string>

namespace up::ipc {

// The IPv4 address of `host` (dotted, or a name) with `port`. UsageError
// naming `what` (e.g. "--master-addr") and the host when it does not resolve.
sockaddr_in ResolveIpv4(const std::string& host, int port, const std::string& what = "host");

}  // namespace up::ipc
