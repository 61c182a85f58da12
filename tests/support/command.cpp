// See command.h.
#include "tests/support/command.h"

#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <tuple>
#include <utility>

namespace up::test {

namespace {

// Forks and execs argv with stdout and stderr into a pipe; returns the pid and
// the pipe's read end.
std::pair<int, int> Launch(const std::vector<std::string>& argv) {
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  return {pid, fds[0]};
}

CommandResult Collect(int pid, int fd, double timeout_s);

}  // namespace

BackgroundCommand::BackgroundCommand(const std::vector<std::string>& argv) {
  std::tie(pid_, out_fd_) = Launch(argv);
}

BackgroundCommand::~BackgroundCommand() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (out_fd_ >= 0) close(out_fd_);
}

CommandResult BackgroundCommand::Wait(double timeout_s) {
  CommandResult r = Collect(pid_, out_fd_, timeout_s);
  pid_ = -1;
  out_fd_ = -1;
  return r;
}

CommandResult RunCommand(const std::vector<std::string>& argv, double timeout_s) {
  const auto [pid, fd] = Launch(argv);
  return Collect(pid, fd, timeout_s);
}

namespace {

CommandResult Collect(int pid, int fd, double timeout_s) {
  CommandResult result;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  char buf[4096];
  bool timed_out = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      kill(pid, SIGKILL);
      break;
    }
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000))) <= 0) continue;
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    result.output.append(buf, n);
  }
  close(fd);
  int status = 0;
  waitpid(pid, &status, 0);
  if (timed_out) {
    result.output += "\nTIMEOUT";
    result.exit_code = -1;
  } else {
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  return result;
}

}  // namespace

TempDir::TempDir() {
  char tmpl[] = "/tmp/up-test-XXXXXX";
  if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string BinPath(const std::string& name) { return std::string(UP_BIN_DIR) + "/" + name; }
std::string SourcePath(const std::string& relative) {
  return std::string(UP_SOURCE_DIR) + "/" + relative;
}

void HoldKernelsToAvx2() {
  ::setenv("ONEDNN_MAX_CPU_ISA", "AVX2", 1);
  ::setenv("ATEN_CPU_CAPABILITY", "avx2", 1);
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string JsonField(const std::string& json, const std::string& key) {
  const std::string needle = "\"" + key + "\":";
  const size_t at = json.find(needle);
  if (at == std::string::npos) return "";
  size_t start = at + needle.size();
  size_t end = start;
  if (json[start] == '"') {
    end = json.find('"', start + 1);
    return json.substr(start + 1, end - start - 1);
  }
  int depth = 0;
  for (; end < json.size(); ++end) {
    const char c = json[end];
    if (c == '{' || c == '[') ++depth;
    if (c == '}' || c == ']') {
      if (depth == 0) break;
      --depth;
    }
    if (c == ',' && depth == 0) break;
  }
  return json.substr(start, end - start);
}

std::string RunDigest(const std::string& run) {
  return JsonField(Slurp(run + "/summary.json"), "param_digest");
}

std::vector<int> ProcessesMentioning(const std::string& needle) {
  std::vector<int> pids;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = Slurp(e.path().string() + "/cmdline");
    for (char& c : cmdline) c = c ? c : ' ';
    if (cmdline.find(needle) != std::string::npos && std::stoi(name) != getpid())
      pids.push_back(std::stoi(name));
  }
  return pids;
}

std::vector<std::string> ErrorLines(const std::string& output) {
  std::vector<std::string> out;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);)
    if (line.find("error") != std::string::npos) out.push_back(line);
  return out;
}

CommandResult Up(std::vector<std::string> args, double timeout_s) {
  args.insert(args.begin(), BinPath("unet-pipeline"));
  return RunCommand(args, timeout_s);
}

}  // namespace up::test
