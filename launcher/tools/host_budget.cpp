// See host_budget.h.
#include "launcher/tools/host_budget.h"

#include <fstream>
#include <sstream>

#include "common/base/byte_size.h"
#include "common/base/errors.h"
#include "common/layout/level_counts.h"
#include "common/layout/pipeline_layout.h"
#include "launcher/tools/memory_plan.h"

namespace up {
namespace {

bool OnCpu(const std::string& device) { return device.rfind("cpu", 0) == 0; }

// What checkpointing or offload keeps of every unit of one sample.
int64_t KeptElements(const StageCounts& enc, const StageCounts& dec, bool blocks) {
  return blocks ? enc.block_checkpoint_elements + dec.block_checkpoint_elements
                : enc.checkpoint_elements + dec.checkpoint_elements;
}

// The single-process row of PlanMemory that trains as `config` says.
std::string SingleProcessRow(const Config& c) {
  if (c.train.offload == OnOff::kOn) return "single-process offload";
  switch (c.train.checkpointing) {
    case Checkpointing::kLevels:
      return "single-process checkpointing";
    case Checkpointing::kBlocks:
      return "single-process checkpointing blocks";
    default:
      return "single-process";
  }
}

}  // namespace

bool TrainsOnHost(const Config& c) {
  if (!c.pipeline.devices.empty()) {
    for (const std::string& d : c.pipeline.devices)
      if (!OnCpu(d)) return false;
    return true;
  }
  return OnCpu(c.pipeline.encoder.device) && OnCpu(c.pipeline.decoder.device);
}

HostNeed EstimateHostNeed(const Config& c, bool single_process, bool device_is_host) {
  HostNeed h;
  const StageCounts enc = EncoderCounts(c), dec = DecoderCounts(c);
  const int64_t n = MicroBatchSamples(c);
  const int64_t m = c.train.micro_batches;
  const int64_t a = BytesPerActivation(c);
  const int64_t state = StateBytes(c, enc) + StateBytes(c, dec);
  const bool has_blocks = c.model.kind != ModelKind::kTorchscript;
  if (single_process) {
    h.processes = 1;
    if (device_is_host) {
      h.state_bytes = state;
      for (const PlanRow& row : PlanMemory(c, 0))
        if (row.name == SingleProcessRow(c))
          h.device_bytes = row.peak_bytes - row.context_bytes - row.state_bytes;
    }
    if (c.train.offload == OnOff::kOn) {  // one micro-batch at a time
      const bool blocks = c.train.checkpointing == Checkpointing::kBlocks ||
                          (c.train.checkpointing == Checkpointing::kOff && has_blocks);
      h.offload_bytes = KeptElements(enc, dec, blocks) * n * a;
    }
  } else {
    const PipelineLayout layout = ResolveLayout(c);
    const int64_t replicas = c.pipeline.replicas;
    h.processes = static_cast<int>(layout.stages.size() * replicas) + 1;  // and the launcher
    // Parked between turns, or on a CPU device anyway: every stage's whole
    // state (a GPU run that never parks keeps it on the card).
    if (device_is_host || c.pipeline.park != Park::kNever) h.state_bytes = state * replicas;
    // On a CPU device the stages take turns on it (PlanParts' estimate):
    // the largest turn and what the others hold between theirs.
    if (device_is_host) h.device_bytes = PlanParts(c).shared_need.tensor_bytes * replicas;
    if (c.pipeline.offload == OnOff::kOn) {  // every micro-batch until its backward
      const bool blocks = c.pipeline.recompute_unit == RecomputeUnit::kBlock;
      h.offload_bytes = KeptElements(enc, dec, blocks) * n * a * m * replicas;
    }
    if (c.pipeline.transport == TransportKind::kShm) {
      int64_t one = 0;  // one micro-batch's tensors over every channel
      for (const StageChannel& ch : layout.channels)
        for (const WireTensor& t : ch.tensors) {
          int64_t numel = 1;
          for (int64_t d : t.shape) numel *= d;
          one += numel * a;
        }
      // forward and backward rings, a slot per micro-batch
      h.ring_bytes = one * 2 * m * replicas;
    }
  }
  h.runtime_bytes = h.processes * kHostRuntimeAllowanceBytes;
  return h;
}

std::string HostNeedText(const HostNeed& need) {
  std::string parts = FormatBytes(need.runtime_bytes) + " runtime of " +
                      std::to_string(need.processes) +
                      (need.processes == 1 ? " process" : " processes");
  auto add = [&](int64_t bytes, const char* what) {
    if (bytes > 0) parts += " + " + FormatBytes(bytes) + " " + what;
  };
  add(need.state_bytes, "state");
  add(need.device_bytes, "device tensors");
  add(need.offload_bytes, "offloaded");
  add(need.ring_bytes, "ring");
  return FormatBytes(need.total()) + " (" + parts + ")";
}

MachineMemory ReadMachineMemory() {
  MachineMemory out;
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string key;
    int64_t kib = 0;
    if (!(words >> key >> kib)) continue;
    if (key == "MemTotal:") out.total_bytes = kib * 1024;
    if (key == "MemAvailable:") out.available_bytes = kib * 1024;
  }
  return out;
}

int64_t ParseHostMem(const std::string& text) {
  if (text.empty()) {
    const int64_t total = ReadMachineMemory().total_bytes;
    if (total <= 0)
      throw UsageError("--host-mem: cannot read MemTotal from /proc/meminfo; give a size (12GiB)");
    return total;
  }
  return ParseByteSize(text, "--host-mem");
}

std::string CheckHostFits(const HostNeed& need, const MachineMemory& machine) {
  if (machine.total_bytes > 0 && need.total() > machine.total_bytes) {
    throw UsageError(
        "host memory: this run needs about " + HostNeedText(need) +
        " by the estimate, but the "
        "machine has " +
        FormatBytes(machine.total_bytes) +
        " (MemTotal), and the kernel would "
        "kill it; train fewer micro-batches in flight (train.micro_batches), a smaller data.size, "
        "or another way (`unet-pipeline plan --config C --host-mem SIZE` gives each way's host "
        "bytes)");
  }
  if (machine.available_bytes > 0 && need.total() > machine.available_bytes) {
    return "host memory: this run needs about " + FormatBytes(need.total()) +
           " by the estimate, more than the " + FormatBytes(machine.available_bytes) +
           " available now (MemAvailable) of the machine's " + FormatBytes(machine.total_bytes) +
           "; it runs, and may be killed if other processes keep theirs";
  }
  return "";
}

}  // namespace up
