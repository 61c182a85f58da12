// ChildProcess: one stage process (encoder or decoder) started and owned by
// the launcher, with its exit status and peak memory once it has ended.
//
// Spawn() forks and execs; it throws instead of returning a child that could
// not start (missing binary, exec failure reported back through a CLOEXEC
// pipe). With die_with_parent the child gets SIGKILL when the thread that
// spawned it exits (PR_SET_PDEATHSIG follows the forking *thread*), so spawn
// from a thread that lives as long as the children, e.g. the main thread.
// The child stays in the launcher's process group and starts with an empty
// signal mask; signals the launcher ignores stay ignored (exec keeps SIG_IGN).
//
// Ownership: a ChildProcess owns its pid until reaped; the destructor of a
// running child sends SIGKILL and reaps it, so no zombie or orphan remains.
// Move-only and not thread-safe; do not reap its pid elsewhere (waitpid(-1)
// or SIGCHLD set to SIG_IGN would steal the status).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace up {

struct ExitStatus {
  bool exited = false;  // true: ended by exit(code); false: killed by `signal`
  int code = 0;
  int signal = 0;
  bool core_dumped = false;

  bool success() const { return exited && code == 0; }
  // "exited with code 3", "killed by signal 9 (SIGKILL)".
  std::string Describe() const;
};

struct ChildOptions {
  std::string name;               // for messages, e.g. "encoder"
  std::string executable;         // a path (no PATH search); relative to the cwd if no '/'
  std::vector<std::string> args;  // argv[1..]; argv[0] is `executable`
  // Added to (or replacing in) the launcher's environment.
  std::vector<std::pair<std::string, std::string>> extra_env;
  bool die_with_parent = true;
  // When set, the child's stdout and stderr go to this file (truncated).
  std::string output_file;
};

class ChildProcess {
 public:
  using Deadline = std::chrono::steady_clock::time_point;

  // UsageError naming the path if the executable is missing, not a regular
  // file or not executable (checked before forking, and again by exec);
  // RuntimeError if fork/exec fail otherwise.
  static ChildProcess Spawn(const ChildOptions& options);

  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  // If still running: SIGKILL, then reap (blocks until the kernel ends it).
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  const std::string& name() const { return name_; }
  // A pidfd that polls readable once the child has ended (for WaitReadable
  // next to control sockets); -1 if the kernel has no pidfd_open. Owned here.
  int pidfd() const { return pidfd_; }

  // Reaps the child if it has ended (non-blocking); the status is cached.
  std::optional<ExitStatus> Poll();
  // Waits for the child to end. TimeoutError (naming the child and the
  // limit) at the deadline; the child keeps running then.
  ExitStatus Wait(Deadline deadline);
  // Sends `sig`; a no-op once the child has been reaped.
  void Kill(int sig = SIGKILL);
  bool running() { return !Poll().has_value(); }
  // Peak resident set size from wait4's rusage once reaped, else 0.
  int64_t peak_rss_bytes() const { return peak_rss_bytes_; }

 private:
  ChildProcess(std::string name, pid_t pid, int pidfd)
      : name_(std::move(name)), pid_(pid), pidfd_(pidfd) {}
  // Kills and reaps if running; closes the pidfd.
  void Release() noexcept;
  // One wait4; true if reaped (status cached). `block` waits.
  bool Reap(bool block);

  std::string name_;
  pid_t pid_ = -1;
  int pidfd_ = -1;
  std::optional<ExitStatus> status_;
  int64_t peak_rss_bytes_ = 0;
};

}  // namespace up
