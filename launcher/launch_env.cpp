// See launch_env.h.
#include "launcher/launch_env.h"

#include <cstdlib>

#include "common/base/errors.h"
#include "common/base/logging.h"

namespace up {
namespace {

int IntVar(const GetEnv& env, const std::string& name, int lo) {
  const std::optional<std::string> text = env(name);
  if (!text) throw UsageError(name + " is not set (the launch sets it; see docs/SCALE-OUT.md)");
  char* end = nullptr;
  const long v = std::strtol(text->c_str(), &end, 10);
  if (text->empty() || *end != '\0' || v < lo || v > 1 << 20)
    throw UsageError(Str(name, " = '", *text, "': not an integer >= ", lo));
  return static_cast<int>(v);
}

}  // namespace

std::string FirstSlurmHost(const std::string& nodelist) {
  size_t end = 0;
  int depth = 0;
  while (end < nodelist.size() && !(nodelist[end] == ',' && depth == 0)) {
    depth += nodelist[end] == '[' ? 1 : nodelist[end] == ']' ? -1 : 0;
    ++end;
  }
  const std::string first = nodelist.substr(0, end);
  const size_t open = first.find('[');
  if (first.empty() || depth != 0 || (open != std::string::npos && first.back() != ']'))
    throw UsageError("SLURM_JOB_NODELIST = '" + nodelist + "': not a SLURM node list");
  if (open == std::string::npos) return first;
  // prefix[a-b,c]: the first range's first number, its zero padding kept.
  const std::string inside = first.substr(open + 1, first.size() - open - 2);
  const std::string start = inside.substr(0, inside.find_first_of("-,"));
  if (start.empty() || start.find_first_not_of("0123456789") != std::string::npos)
    throw UsageError("SLURM_JOB_NODELIST = '" + nodelist + "': not a SLURM node list");
  return first.substr(0, open) + start;
}

std::optional<LaunchEnvironment> ReadLaunchEnvironment(const GetEnv& env) {
  LaunchEnvironment out;
  if (env("RANK") && env("WORLD_SIZE") && env("MASTER_ADDR")) {
    out.source = "torchrun";
    const int local_world = env("LOCAL_WORLD_SIZE") ? IntVar(env, "LOCAL_WORLD_SIZE", 1) : 1;
    if (local_world != 1) {
      throw UsageError(Str("LOCAL_WORLD_SIZE = ", local_world,
                           ": run one unet-pipeline a machine (torchrun --nproc-per-node 1); it "
                           "starts the stages itself"));
    }
    out.nodes.node_rank = IntVar(env, "RANK", 0);
    out.nodes.nnodes = IntVar(env, "WORLD_SIZE", 1);
    out.nodes.master_addr = *env("MASTER_ADDR");
    out.nodes.master_port = IntVar(env, "MASTER_PORT", 1);
    const std::optional<std::string> agent = env("TORCHELASTIC_USE_AGENT_STORE");
    out.store_exists = agent && (*agent == "True" || *agent == "true" || *agent == "1");
  } else if (env("SLURM_PROCID") && env("SLURM_NTASKS")) {
    out.source = "SLURM";
    out.nodes.node_rank = IntVar(env, "SLURM_PROCID", 0);
    out.nodes.nnodes = IntVar(env, "SLURM_NTASKS", 1);
    const int machines = env("SLURM_NNODES") ? IntVar(env, "SLURM_NNODES", 1) : out.nodes.nnodes;
    if (machines != out.nodes.nnodes) {
      throw UsageError(Str("SLURM_NTASKS = ", out.nodes.nnodes, " on SLURM_NNODES = ", machines,
                           " machines: run one task a machine (srun --ntasks-per-node=1); "
                           "unet-pipeline starts the stages itself"));
    }
    if (!env("SLURM_JOB_NODELIST"))
      throw UsageError("SLURM_JOB_NODELIST is not set (srun sets it)");
    out.nodes.master_addr = FirstSlurmHost(*env("SLURM_JOB_NODELIST"));
    out.nodes.master_port =
        env("MASTER_PORT")
            ? IntVar(env, "MASTER_PORT", 1)
            : 29500 + (env("SLURM_JOB_ID") ? IntVar(env, "SLURM_JOB_ID", 0) % 1000 : 0);
  } else {
    return std::nullopt;
  }
  if (out.nodes.nnodes == 1) {  // one machine: nothing to meet at
    out.nodes = NodeOptions{};
    out.store_exists = false;
  }
  if (out.nodes.node_rank >= out.nodes.nnodes) {
    throw UsageError(Str(out.source, ": rank ", out.nodes.node_rank, " of ", out.nodes.nnodes,
                         " machines is out of range"));
  }
  return out;
}

GetEnv ProcessEnvironment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    return v ? std::optional<std::string>(v) : std::nullopt;
  };
}

}  // namespace up
