// See bench_machine.h.
#include "bench/bench_machine.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <torch/torch.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "bench/bench_util.h"
#include "common/base/json_writer.h"

namespace up::bench {
namespace {

// The value after "key<spaces>:" on the first line of `path` that starts with `key`.
std::string ProcValue(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key, 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const size_t start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "" : line.substr(start);
  }
  return "";
}

}  // namespace

Machine DescribeMachine() {
  Machine m;
  m.cpu_model = ProcValue("/proc/cpuinfo", "model name");
  if (m.cpu_model.empty()) m.cpu_model = "unknown";
  std::istringstream flags(ProcValue("/proc/cpuinfo", "flags"));
  for (std::string flag; flags >> flag;) m.avx512 = m.avx512 || flag == "avx512f";
  if (const char* isa = std::getenv("ONEDNN_MAX_CPU_ISA")) m.onednn_max_cpu_isa = isa;
  m.cores = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  const std::string mem_kb = ProcValue("/proc/meminfo", "MemTotal");  // "24576000 kB"
  m.memory_bytes = mem_kb.empty() ? 0 : std::stoll(mem_kb) * 1024;
  struct utsname u {};
  if (::uname(&u) == 0) m.kernel = std::string(u.sysname) + " " + u.release;
  m.torch_version = TORCH_VERSION;
  m.gpus = torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0;
  std::ifstream load("/proc/loadavg");
  load >> m.load_1m;
  return m;
}

std::string MachineJson(const Machine& m) {
  JsonWriter j;
  j.Field("cpu_model", m.cpu_model).Field("avx512", m.avx512);
  if (!m.onednn_max_cpu_isa.empty()) j.Field("onednn_max_cpu_isa", m.onednn_max_cpu_isa);
  j.Field("cores", m.cores)
      .Field("memory_bytes", m.memory_bytes)
      .Field("kernel", m.kernel)
      .Field("torch", m.torch_version)
      .Field("gpus", m.gpus)
      .Field("load_1m", m.load_1m);
  return j.str();
}

std::string MachineText(const Machine& m) {
  return m.cpu_model + ", " + std::to_string(m.cores) + " cores, " + BytesText(m.memory_bytes) +
         ", " + m.kernel + ", LibTorch " + m.torch_version + ", " +
         (m.gpus ? std::to_string(m.gpus) + " GPU(s)" : "no GPU") + ", load " +
         JsonWriter::FormatDouble(m.load_1m);
}

}  // namespace up::bench
