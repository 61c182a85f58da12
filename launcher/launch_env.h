// Where this launcher stands among the run's machines when a cluster tool
// started it: torchrun (`torchrun --no-python ... unet-pipeline train ...`
// sets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT) or SLURM (`srun unet-pipeline train ...` sets SLURM_PROCID,
// SLURM_NTASKS, SLURM_NNODES, SLURM_LOCALID, SLURM_JOB_NODELIST,
// SLURM_JOB_ID). A pure function of the environment, so that tests give it
// any.
//
// One launcher a machine: it starts the stages itself, so torchrun runs it
// with --nproc-per-node 1 and srun with --ntasks-per-node 1 (anything else
// is the UsageError, saying so). Under torchrun the rendezvous store already
// exists (torchrun's agent serves it at MASTER_ADDR:MASTER_PORT and says so
// with TORCHELASTIC_USE_AGENT_STORE=True): node 0 then joins it rather than
// serving its own. Under SLURM, node 0 is the first host of the job's node
// list and the port is MASTER_PORT when set, else 29500 + SLURM_JOB_ID % 1000
// (two jobs sharing a node get different ports).
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "launcher/placement.h"

namespace up {

using GetEnv = std::function<std::optional<std::string>(const std::string&)>;

struct LaunchEnvironment {
  std::string source;  // "torchrun" or "SLURM", for the log line
  NodeOptions nodes;
  bool store_exists = false;  // node 0 joins the store rather than serving it
};

// nullopt when neither torchrun's nor SLURM's variables are set (torchrun's
// win when both are). UsageError naming the variable for a malformed value
// or more than one task a machine.
std::optional<LaunchEnvironment> ReadLaunchEnvironment(const GetEnv& env);

// This process's environment.
GetEnv ProcessEnvironment();

// The first host of a SLURM node list: "gpu[07-09,12],cpu1" -> "gpu07".
// UsageError for an empty or malformed list.
std::string FirstSlurmHost(const std::string& nodelist);

}  // namespace up
