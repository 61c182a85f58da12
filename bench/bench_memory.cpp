// See bench_memory.h. Peak RSS comes from each run's summary.json (getrusage /
// wait4 maxrss: private memory plus the shared-memory ring pages the process
// touched, plus the LibTorch runtime every process loads).
#include "bench/bench_memory.h"

#include <torch/torch.h>

#include <algorithm>
#include <iostream>
#include <sstream>

#include "bench/bench_machine.h"
#include "bench/bench_trainer.h"
#include "bench/bench_util.h"
#include "common/base/errors.h"
#include "common/base/json_writer.h"
#include "common/config/config_file.h"
#include "common/model/unet.h"
#include "ipc/shm_ring.h"

namespace up::bench {
namespace {

int64_t Peak(const TrainerResult& r, const std::string& what, const std::string& process) {
  const std::optional<double> v = JsonNestedNumber(r.summary_json, what, process);
  if (!v) throw RuntimeError("bench memory: summary.json has no " + what + "." + process);
  return static_cast<int64_t>(*v);
}
int64_t PeakRss(const TrainerResult& r, const std::string& process) {
  return Peak(r, "peak_rss_bytes", process);
}

// Bytes of both rings the pipeline creates for `c` (one slot per micro-batch each).
int64_t RingBytes(const Config& c) {
  const BoundarySpec spec = BoundaryShapes(c.model, c.data.size, MicroBatchSamples(c));
  std::vector<ipc::TensorSpec> specs;
  for (size_t i = 0; i < spec.names.size(); ++i)
    specs.push_back({spec.names[i], ipc::DType::kFloat32, spec.shapes[i]});
  return 2 * c.train.micro_batches * static_cast<int64_t>(ipc::ShmRing::PayloadBytesFor(specs));
}

std::string Mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", bytes / 1048576.0);
  return buf;
}

}  // namespace

MemoryReport RunMemoryBench(const MemoryOptions& o) {
  if (o.config.empty()) throw UsageError("bench memory needs --config FILE");
  if (o.steps < 1 || o.steps > 100000)
    throw UsageError("--steps " + std::to_string(o.steps) + " is out of range; use 1 to 100000");
  std::vector<std::string> sets = o.sets;
  sets.insert(sets.end(), {"train.steps=" + std::to_string(o.steps), "checkpoint.every=0"});
  const Config config = LoadConfig(o.config, sets);

  MemoryReport m;
  m.options = o;
  m.ring_bytes = RingBytes(config);
  m.encoder_params = ParameterCount(*UNetEncoder(config.model, 0));
  m.decoder_params = ParameterCount(*UNetDecoder(config.model, 0));
  m.runtime = IdleProcessPeakRss();
  TempFolder tmp;
  std::cerr << "bench memory: single-process run\n";
  const TrainerResult single = RunTrainer({o.config, true, sets, "", {}}, tmp.path() + "/single");
  std::cerr << "bench memory: pipeline run\n";
  const TrainerResult pipe = RunTrainer({o.config, false, sets, "", {}}, tmp.path() + "/pipeline");
  m.trainer = PeakRss(single, "trainer");
  m.encoder = PeakRss(pipe, "encoder");
  m.decoder = PeakRss(pipe, "decoder");
  m.launcher = PeakRss(pipe, "launcher");
  m.larger_stage = m.encoder >= m.decoder ? "encoder" : "decoder";
  const int64_t larger = std::max(m.encoder, m.decoder);
  m.ratio = static_cast<double>(larger) / m.trainer;
  m.ratio_above_runtime = static_cast<double>(larger - m.runtime) / (m.trainer - m.runtime);
  m.trainer_tensors = Peak(single, "peak_tensor_bytes", "trainer");
  m.encoder_tensors = Peak(pipe, "peak_tensor_bytes", "encoder");
  m.decoder_tensors = Peak(pipe, "peak_tensor_bytes", "decoder");
  m.larger_tensor_stage = m.encoder_tensors >= m.decoder_tensors ? "encoder" : "decoder";
  m.tensor_ratio =
      static_cast<double>(std::max(m.encoder_tensors, m.decoder_tensors)) / m.trainer_tensors;
  // The stages run on cpu in this build (cuda stages are refused), so there
  // is no device memory to measure even where a GPU is visible.
  m.device_memory =
      torch::cuda::is_available() ? "not measured: stages run on cpu in this build" : "no GPU";
  return m;
}

std::string MemoryJson(const MemoryReport& m) {
  JsonWriter rss;
  rss.Field("trainer", m.trainer)
      .Field("encoder", m.encoder)
      .Field("decoder", m.decoder)
      .Field("launcher", m.launcher);
  JsonWriter out;
  out.Field("bench", "memory")
      .Raw("machine", MachineJson(DescribeMachine()))
      .Field("config", m.options.config)
      .Raw("sets", JsonStrings(m.options.sets))
      .Field("steps", m.options.steps)
      .Raw("peak_rss_bytes", rss.str())
      .Raw("peak_tensor_bytes", JsonWriter()
                                    .Field("trainer", m.trainer_tensors)
                                    .Field("encoder", m.encoder_tensors)
                                    .Field("decoder", m.decoder_tensors)
                                    .str())
      .Field("larger_tensor_stage", m.larger_tensor_stage)
      .Field("tensor_ratio", m.tensor_ratio)
      .Field("ring_bytes", m.ring_bytes)
      .Field("runtime_bytes", m.runtime)
      .Field("encoder_params", m.encoder_params)
      .Field("decoder_params", m.decoder_params)
      .Field("larger_stage", m.larger_stage)
      .Field("ratio", m.ratio)
      .Field("ratio_above_runtime", m.ratio_above_runtime)
      .Field("target_ratio", m.target_ratio)
      .Field("device_memory", m.device_memory);
  return out.str();
}

std::string MemoryTable(const MemoryReport& m) {
  std::ostringstream s;
  s << "machine: " << MachineText(DescribeMachine()) << "\n"
    << "config " << m.options.config << ", " << m.options.steps << " steps per run; peak RSS "
    << "(includes the ring pages each process touched: both rings hold " << Mib(m.ring_bytes)
    << " MiB)\n";
  char line[256];
  auto row = [&](const char* who, int64_t bytes) {
    std::snprintf(line, sizeof(line), "%-22s %10s MiB %8.2fx trainer\n", who, Mib(bytes).c_str(),
                  static_cast<double>(bytes) / m.trainer);
    s << line;
  };
  row("single-process trainer", m.trainer);
  row("encoder", m.encoder);
  row("decoder", m.decoder);
  row("launcher", m.launcher);
  row("idle process (runtime)", m.runtime);
  std::snprintf(line, sizeof(line), "larger stage (%s) / trainer, RSS: %.2fx\n",
                m.larger_stage.c_str(), m.ratio);
  s << line;
  std::snprintf(line, sizeof(line),
                "peak tensor bytes: trainer %s MiB, encoder %s MiB, decoder %s MiB; larger stage "
                "(%s) / trainer: %.2fx (target <= %.1fx)\n",
                Mib(m.trainer_tensors).c_str(), Mib(m.encoder_tensors).c_str(),
                Mib(m.decoder_tensors).c_str(), m.larger_tensor_stage.c_str(), m.tensor_ratio,
                m.target_ratio);
  s << line;
  std::snprintf(line, sizeof(line),
                "above the idle runtime: %.2fx; parameters encoder %lld, decoder %lld\n",
                m.ratio_above_runtime, static_cast<long long>(m.encoder_params),
                static_cast<long long>(m.decoder_params));
  s << line << "peak device memory: " << m.device_memory << "\n";
  return s.str();
}

}  // namespace up::bench
