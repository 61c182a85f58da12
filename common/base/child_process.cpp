// ChildProcess implementation (see child_process.h): fork + execve with argv
// and envp built before the fork (the child of a multi-threaded launcher may
// only make async-signal-safe calls), an exec-error pipe, wait4 for the status
// and peak RSS, and a pidfd to wait on without polling in a loop.
#include "common/base/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <thread>

#include "common/base/errors.h"

extern char** environ;

namespace up {
namespace {

using Clock = std::chrono::steady_clock;

int OpenPidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  const long fd = ::syscall(SYS_pidfd_open, pid, 0);  // close-on-exec by default
  return fd < 0 ? -1 : static_cast<int>(fd);
#else
  (void)pid;
  return -1;
#endif
}

std::string BuildHint(const std::string& who, const std::string& exe, const std::string& why) {
  return who + " executable '" + exe + "' " + why +
         "; build it first (cmake --build build) or pass the right path";
}

// The environment for the child: the launcher's, with `extra` added or
// replacing entries of the same name.
std::vector<std::string> ChildEnvironment(
    const std::vector<std::pair<std::string, std::string>>& extra, const std::string& who) {
  for (const auto& [key, value] : extra) {
    if (key.empty() || key.find('=') != std::string::npos) {
      throw UsageError("environment variable name '" + key + "' for " + who +
                       " is invalid (empty or contains '=')");
    }
  }
  std::vector<std::string> env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string text = *entry;
    const std::string key = text.substr(0, text.find('='));
    const bool replaced =
        std::any_of(extra.begin(), extra.end(), [&key](const auto& kv) { return kv.first == key; });
    if (!replaced) env.push_back(text);
  }
  for (const auto& [key, value] : extra) env.push_back(key + "=" + value);
  return env;
}

std::vector<char*> PointerArray(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  pointers.reserve(strings.size() + 1);
  for (std::string& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

}  // namespace

std::string ExitStatus::Describe() const {
  if (exited) return "exited with code " + std::to_string(code);
  if (signal <= 0) return "ended with an unknown status (it was reaped elsewhere)";
  std::string text = "killed by signal " + std::to_string(signal);
  if (const char* abbrev = ::sigabbrev_np(signal)) text += std::string(" (SIG") + abbrev + ")";
  if (core_dumped) text += " (core dumped)";
  return text;
}

ChildProcess ChildProcess::Spawn(const ChildOptions& options) {
  const std::string who = options.name.empty() ? "child process" : options.name;
  const std::string& exe = options.executable;
  if (exe.empty()) throw UsageError("no executable given for " + who);
  struct stat st {};
  if (::stat(exe.c_str(), &st) != 0) {
    throw UsageError(
        BuildHint(who, exe, "does not exist (" + std::string(std::strerror(errno)) + ")"));
  }
  if (!S_ISREG(st.st_mode) || ::access(exe.c_str(), X_OK) != 0) {
    throw UsageError(BuildHint(who, exe, "is not an executable file"));
  }

  std::vector<std::string> args;
  args.reserve(options.args.size() + 1);
  args.push_back(exe);
  args.insert(args.end(), options.args.begin(), options.args.end());
  std::vector<std::string> env = ChildEnvironment(options.extra_env, who);
  std::vector<char*> argv = PointerArray(args);
  std::vector<char*> envp = PointerArray(env);

  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    throw RuntimeError("cannot start " + who + ": pipe2 failed: " + std::strerror(errno));
  }
  int output_fd = -1;  // opened before the fork: open() is not for the child to fail at
  if (!options.output_file.empty()) {
    output_fd = ::open(options.output_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (output_fd < 0) {
      const int err = errno;
      ::close(pipe_fds[0]);
      ::close(pipe_fds[1]);
      throw RuntimeError("cannot start " + who + ": " + options.output_file + ": " +
                         std::strerror(err));
    }
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    if (output_fd >= 0) ::close(output_fd);
    throw RuntimeError("cannot start " + who + ": fork failed: " + std::strerror(err));
  }
  if (pid == 0) {
    // Child: async-signal-safe calls only.
    ::close(pipe_fds[0]);
    if (output_fd >= 0) {  // dup2 clears CLOEXEC on the copies
      ::dup2(output_fd, STDOUT_FILENO);
      ::dup2(output_fd, STDERR_FILENO);
    }
    if (options.die_with_parent) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      // The parent may have died before prctl took effect.
      if (::getppid() != parent) ::_exit(127);
    }
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execve(argv[0], argv.data(), envp.data());
    const int err = errno;
    ssize_t ignored = ::write(pipe_fds[1], &err, sizeof(err));
    (void)ignored;
    ::_exit(127);
  }

  ::close(pipe_fds[1]);
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(pipe_fds[0], &child_errno, sizeof(child_errno));
  } while (n < 0 && errno == EINTR);
  ::close(pipe_fds[0]);
  // Owns the pid from here on: a throw below kills and reaps it.
  ChildProcess child(who, pid, OpenPidfd(pid));
  if (n > 0) {
    const std::string why = std::strerror(child_errno);
    if (child_errno == ENOENT || child_errno == EACCES || child_errno == ENOEXEC ||
        child_errno == ENOTDIR) {
      throw UsageError(BuildHint(who, exe, "could not be executed (" + why + ")"));
    }
    throw RuntimeError("cannot start " + who + " ('" + exe + "'): exec failed: " + why);
  }
  return child;
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : name_(std::move(other.name_)),
      pid_(std::exchange(other.pid_, -1)),
      pidfd_(std::exchange(other.pidfd_, -1)),
      status_(std::exchange(other.status_, std::nullopt)),
      peak_rss_bytes_(std::exchange(other.peak_rss_bytes_, 0)) {}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    Release();
    name_ = std::move(other.name_);
    pid_ = std::exchange(other.pid_, -1);
    pidfd_ = std::exchange(other.pidfd_, -1);
    status_ = std::exchange(other.status_, std::nullopt);
    peak_rss_bytes_ = std::exchange(other.peak_rss_bytes_, 0);
  }
  return *this;
}

ChildProcess::~ChildProcess() { Release(); }

void ChildProcess::Release() noexcept {
  if (pid_ > 0 && !status_) {
    ::kill(pid_, SIGKILL);
    Reap(/*block=*/true);
  }
  if (pidfd_ >= 0) ::close(pidfd_);
  pidfd_ = -1;
  pid_ = -1;
}

bool ChildProcess::Reap(bool block) {
  if (status_) return true;
  for (;;) {
    int raw = 0;
    rusage usage{};
    const pid_t r = ::wait4(pid_, &raw, block ? 0 : WNOHANG, &usage);
    if (r == pid_) {
      ExitStatus status;
      status.exited = WIFEXITED(raw);
      status.code = status.exited ? WEXITSTATUS(raw) : 0;
      status.signal = WIFSIGNALED(raw) ? WTERMSIG(raw) : 0;
      status.core_dumped = WIFSIGNALED(raw) && WCOREDUMP(raw);
      status_ = status;
      peak_rss_bytes_ = static_cast<int64_t>(usage.ru_maxrss) * 1024;  // KiB on Linux
      return true;
    }
    if (r == 0) return false;
    if (errno == EINTR) continue;
    // ECHILD: someone else reaped it; the status is lost.
    status_ = ExitStatus{false, -1, 0, false};
    return true;
  }
}

std::optional<ExitStatus> ChildProcess::Poll() {
  if (pid_ <= 0) throw UsageError("ChildProcess::Poll on a moved-from child");
  if (Reap(/*block=*/false)) return status_;
  return std::nullopt;
}

ExitStatus ChildProcess::Wait(Deadline deadline) {
  if (pid_ <= 0) throw UsageError("ChildProcess::Wait on a moved-from child");
  const auto start = Clock::now();
  for (;;) {
    if (Reap(/*block=*/false)) return *status_;
    const auto now = Clock::now();
    if (now >= deadline) {
      const auto ms = std::chrono::round<std::chrono::milliseconds>(deadline - start);
      throw TimeoutError("timed out after " + std::to_string(std::max<int64_t>(ms.count(), 0)) +
                         " ms waiting for " + name_ + " (pid " + std::to_string(pid_) +
                         ") to exit");
    }
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
    if (pidfd_ >= 0) {
      pollfd p{pidfd_, POLLIN, 0};
      ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, INT_MAX)));  // EINTR: loop
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min<int64_t>(left, 5)));
    }
  }
}

void ChildProcess::Kill(int sig) {
  if (pid_ <= 0 || status_) return;
  ::kill(pid_, sig);
}

}  // namespace up
