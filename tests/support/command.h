// Test support: run a real program, capture its output and exit status.
#pragma once

#include <string>
#include <vector>

namespace up::test {

struct CommandResult {
  int exit_code = -1;  // exit code, or 128 + signal
  std::string output;  // stdout and stderr, interleaved
};

// Runs argv[0] with the arguments, waits at most `timeout_s` (then kills it
// and reports exit code -1 with "TIMEOUT" appended to the output).
CommandResult RunCommand(const std::vector<std::string>& argv, double timeout_s = 300);

// `unet-pipeline ARGS...`, the built launcher.
CommandResult Up(std::vector<std::string> args, double timeout_s = 300);

// A program started in the background (output captured), for tests that
// signal it while it runs.
class BackgroundCommand {
 public:
  explicit BackgroundCommand(const std::vector<std::string>& argv);
  ~BackgroundCommand();  // kills and reaps it if still running
  BackgroundCommand(const BackgroundCommand&) = delete;
  BackgroundCommand& operator=(const BackgroundCommand&) = delete;
  int pid() const { return pid_; }
  CommandResult Wait(double timeout_s = 300);

 private:
  int pid_ = -1;
  int out_fd_ = -1;
};

// A fresh empty directory under /tmp, removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Path of a built binary (bin/<name>) and of a source file.
std::string BinPath(const std::string& name);
std::string SourcePath(const std::string& relative);

// Whole file as a string ("" if missing); one JSON field's raw value.
std::string Slurp(const std::string& path);
// The lines of `output` that say "error".
std::vector<std::string> ErrorLines(const std::string& output);
std::string JsonField(const std::string& json, const std::string& key);
// The `param_digest` of the run folder `run` (from its summary.json).
std::string RunDigest(const std::string& run);
// Holds the CPU kernels of the programs this process starts to AVX2
// (oneDNN's ONEDNN_MAX_CPU_ISA and ATen's ATEN_CPU_CAPABILITY): bits
// committed to the tree, made on a machine without AVX-512, repeat on one
// with it. For the tests that compare with such bits.
void HoldKernelsToAvx2();
// Pids of processes (not this one) whose command line mentions `needle`;
// stages carry their run folder, so a run's folder finds its stages.
std::vector<int> ProcessesMentioning(const std::string& needle);

}  // namespace up::test
