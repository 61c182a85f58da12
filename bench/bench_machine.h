// The machine a benchmark ran on, as every bench reports it next to its
// figures: CPU model, whether it has AVX-512 (oneDNN's kernels, and the
// tensor bytes they hold, follow it), online cores, memory, kernel, LibTorch
// version and whether a GPU is visible. Read from /proc, uname and the
// environment; thread-safe.
#pragma once

#include <cstdint>
#include <string>

namespace up::bench {

struct Machine {
  std::string cpu_model;           // /proc/cpuinfo "model name", or "unknown"
  bool avx512 = false;             // /proc/cpuinfo "flags" has avx512f
  std::string onednn_max_cpu_isa;  // ONEDNN_MAX_CPU_ISA where set: a limit on those kernels
  int cores = 0;                   // online logical CPUs
  int64_t memory_bytes = 0;
  std::string kernel;  // uname -sr
  std::string torch_version;
  int gpus = 0;        // visible CUDA devices
  double load_1m = 0;  // /proc/loadavg when described: other work on the machine
};

Machine DescribeMachine();

// {"cpu_model","avx512",["onednn_max_cpu_isa",]"cores","memory_bytes","kernel","torch",
//  "gpus","load_1m"}
std::string MachineJson(const Machine& m);
// One line for the tables: "Intel Xeon ... , 2 cores, 23.4 GiB, Linux 6.1, LibTorch 2.11,
// load 1.2".
std::string MachineText(const Machine& m);

}  // namespace up::bench
