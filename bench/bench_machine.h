// The machine a benchmark ran on, as every bench reports it next to its
// figures: CPU model, online cores, memory, kernel, LibTorch version and
// whether a GPU is visible. Read from /proc and uname; thread-safe.
#pragma once

#include <cstdint>
#include <string>

namespace up::bench {

struct Machine {
  std::string cpu_model;  // /proc/cpuinfo "model name", or "unknown"
  int cores = 0;          // online logical CPUs
  int64_t memory_bytes = 0;
  std::string kernel;  // uname -sr
  std::string torch_version;
  int gpus = 0;        // visible CUDA devices
  double load_1m = 0;  // /proc/loadavg when described: other work on the machine
};

Machine DescribeMachine();

// {"cpu_model","cores","memory_bytes","kernel","torch","gpus","load_1m"}
std::string MachineJson(const Machine& m);
// One line for the tables: "Intel Xeon ... , 2 cores, 23.4 GiB, Linux 6.1, LibTorch 2.11,
// load 1.2".
std::string MachineText(const Machine& m);

}  // namespace up::bench
