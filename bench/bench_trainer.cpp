// See bench_trainer.h. posix_spawn with the child's stdout and stderr sent to
// DIR.log, so the bench's own output (a table or JSON) stays clean.
#include "bench/bench_trainer.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include "bench/bench_util.h"
#include "common/base/errors.h"
#include "common/run/metrics_format.h"

extern char** environ;

namespace up::bench {
namespace {

std::string LastLine(const std::string& text) {
  std::istringstream lines(text);
  std::string last;
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) last = line;
  return last.empty() ? "(no output)" : last;
}

}  // namespace

namespace {

// Runs `args` (with `env` added to this process's environment), stdout and
// stderr to `log`; "" when it exits 0, else what happened and its last line.
std::string SpawnAndWait(std::vector<std::string> args, std::vector<std::string> env,
                         const std::string& log) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = -1;
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; ++e) envp.push_back(*e);
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  const int rc = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw RuntimeError("bench: cannot start " + args[0] + ": " + std::strerror(rc));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  return (WIFEXITED(status) ? "exited with code " + std::to_string(WEXITSTATUS(status))
                            : "was killed by signal " + std::to_string(WTERMSIG(status))) +
         ": " + LastLine(ReadFile(log));
}

}  // namespace

TrainerResult RunTrainer(const TrainerSpec& spec, const std::string& out) {
  std::vector<std::string> args{SelfExe(), "train"};
  if (spec.single_process) args.push_back("--single-process");
  args.insert(args.end(), {"--config", spec.config, "--out", out, "-q"});
  for (const std::string& s : spec.sets) args.insert(args.end(), {"--set", s});
  if (!spec.trace.empty()) args.insert(args.end(), {"--trace", spec.trace});
  const std::string failed = SpawnAndWait(args, spec.env, out + ".log");
  if (!failed.empty()) {
    throw RuntimeError(std::string("bench: the ") +
                       (spec.single_process ? "single-process" : "pipeline") + " training run " +
                       failed);
  }
  TrainerResult r;
  r.step_s = JsonLinesNumbers(out + "/" + kMetricsFile, kMetricStepSeconds);
  r.summary_json = ReadFile(out + "/summary.json");
  return r;
}

std::vector<double> RunPeer(const std::vector<std::string>& args, const std::string& log) {
  const std::string failed = SpawnAndWait(args, {}, log);
  if (!failed.empty()) throw RuntimeError("bench: the Python peer " + args[1] + " " + failed);
  return JsonLinesNumbers(log, "step_s");
}

int64_t IdleProcessPeakRss() {
  std::string exe = SelfExe();
  std::string version = "--version";
  char* argv[] = {exe.data(), version.data(), nullptr};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw RuntimeError("bench: cannot start " + exe + ": " + std::strerror(rc));
  int status = 0;
  struct rusage usage {};
  while (::wait4(pid, &status, 0, &usage) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw RuntimeError("bench: `" + exe + " --version` failed; is the build complete?");
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;
}

}  // namespace up::bench
