// The rendezvous of a run that spans machines (or uses a c10d transport):
// c10d's TCPStore, served by node 0's launcher at --master-addr:--master-port
// and joined by every other node's launcher and by the stages (which meet
// there to form their process group, ipc/c10d_channel.h).
//
// Node 0 publishes the run (run id, its control endpoint, the config hash)
// under "up/run"; a node's launcher publishes the exit of a stage that died
// on it under "up/<run id>/exit/<stage>", so node 0 can name the cause.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

namespace up {

struct RunAnnouncement {
  std::string run_id;         // hex
  std::string control;        // tcp:HOST:PORT of node 0's launcher
  std::string config_sha256;  // of the resolved config
  bool resume = false;        // stage files follow over the control connection
  std::string Encode() const;
  static RunAnnouncement Decode(const std::string& text);  // RuntimeError if malformed
};

class Rendezvous {
 public:
  // Serves the store on `host` only (an address of this machine), at `port`
  // (0: a free port, for a run on one machine). UsageError if it cannot bind.
  static Rendezvous Serve(const std::string& host, int port, double timeout_s);
  // Connects to node 0's store; TimeoutError naming the address when it does
  // not answer within `timeout_s`.
  static Rendezvous Join(const std::string& host, int port, double timeout_s);

  Rendezvous(Rendezvous&&) noexcept;
  Rendezvous& operator=(Rendezvous&&) noexcept;
  ~Rendezvous();

  const std::string& host() const { return host_; }
  int port() const { return port_; }
  std::string address() const { return host_ + ":" + std::to_string(port_); }

  void Set(const std::string& key, const std::string& value);
  // Waits for `key` until the deadline; nullopt when it did not appear.
  std::optional<std::string> Get(const std::string& key, double timeout_s);

 private:
  struct Impl;
  Rendezvous(std::unique_ptr<Impl> impl, std::string host, int port);
  std::unique_ptr<Impl> impl_;
  std::string host_;
  int port_ = 0;
};

// The address of this machine that routes to `peer` (for a node's c10d
// sockets); "127.0.0.1" for a loopback peer. RuntimeError if no route.
std::string LocalAddressToward(const std::string& peer);

}  // namespace up
