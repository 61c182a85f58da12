// Where a launcher started by torchrun or srun stands (launcher/launch_env.h):
// the variables each tool sets, torchrun's agent store, SLURM's node list
// and port, and one clear line for a launch that starts more than one
// launcher a machine or gives a malformed value.
#include "launcher/launch_env.h"

#include <gtest/gtest.h>

#include <map>

#include "common/base/errors.h"

namespace up {
namespace {

GetEnv Env(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
}

std::string ErrorOf(const std::map<std::string, std::string>& vars) {
  try {
    ReadLaunchEnvironment(Env(vars));
  } catch (const UsageError& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(LaunchEnv, NothingSetIsNoClusterLaunch) { EXPECT_FALSE(ReadLaunchEnvironment(Env({}))); }

TEST(LaunchEnv, TorchrunsVariablesAndItsAgentStore) {
  const auto env = ReadLaunchEnvironment(Env({{"RANK", "1"},
                                              {"WORLD_SIZE", "2"},
                                              {"LOCAL_RANK", "0"},
                                              {"LOCAL_WORLD_SIZE", "1"},
                                              {"MASTER_ADDR", "10.0.0.5"},
                                              {"MASTER_PORT", "29400"},
                                              {"TORCHELASTIC_USE_AGENT_STORE", "True"}}));
  ASSERT_TRUE(env);
  EXPECT_EQ(env->source, "torchrun");
  EXPECT_EQ(env->nodes.node_rank, 1);
  EXPECT_EQ(env->nodes.nnodes, 2);
  EXPECT_EQ(env->nodes.master_addr, "10.0.0.5");
  EXPECT_EQ(env->nodes.master_port, 29400);
  EXPECT_TRUE(env->store_exists);
  // One machine: nothing to meet at, whatever the address.
  const auto one = ReadLaunchEnvironment(
      Env({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_ADDR", "x"}, {"MASTER_PORT", "1"}}));
  ASSERT_TRUE(one);
  EXPECT_EQ(one->nodes.nnodes, 1);
  EXPECT_EQ(one->nodes.master_port, 0);
  EXPECT_FALSE(one->store_exists);
}

TEST(LaunchEnv, SlurmsVariablesNodeListAndPort) {
  const auto env = ReadLaunchEnvironment(Env({{"SLURM_PROCID", "2"},
                                              {"SLURM_NTASKS", "3"},
                                              {"SLURM_NNODES", "3"},
                                              {"SLURM_LOCALID", "0"},
                                              {"SLURM_JOB_NODELIST", "gpu[07-09]"},
                                              {"SLURM_JOB_ID", "123456"}}));
  ASSERT_TRUE(env);
  EXPECT_EQ(env->source, "SLURM");
  EXPECT_EQ(env->nodes.node_rank, 2);
  EXPECT_EQ(env->nodes.nnodes, 3);
  EXPECT_EQ(env->nodes.master_addr, "gpu07");
  EXPECT_EQ(env->nodes.master_port, 29500 + 456);
  EXPECT_FALSE(env->store_exists);
  const auto given = ReadLaunchEnvironment(Env({{"SLURM_PROCID", "0"},
                                                {"SLURM_NTASKS", "2"},
                                                {"SLURM_JOB_NODELIST", "a,b"},
                                                {"MASTER_PORT", "4000"}}));
  ASSERT_TRUE(given);
  EXPECT_EQ(given->nodes.master_addr, "a");
  EXPECT_EQ(given->nodes.master_port, 4000);
}

TEST(LaunchEnv, FirstHostOfANodeList) {
  EXPECT_EQ(FirstSlurmHost("node01"), "node01");
  EXPECT_EQ(FirstSlurmHost("gpu[007-009,012],cpu1"), "gpu007");
  EXPECT_EQ(FirstSlurmHost("gpu[3,5]"), "gpu3");
  EXPECT_EQ(FirstSlurmHost("a-1,b-2"), "a-1");
  EXPECT_THROW(FirstSlurmHost(""), UsageError);
  EXPECT_THROW(FirstSlurmHost("gpu[x-2]"), UsageError);
  EXPECT_THROW(FirstSlurmHost("gpu[1-2"), UsageError);
}

TEST(LaunchEnv, MoreThanOneLauncherAMachineOrABadValueIsOneLine) {
  EXPECT_NE(ErrorOf({{"RANK", "0"},
                     {"WORLD_SIZE", "8"},
                     {"LOCAL_WORLD_SIZE", "8"},
                     {"MASTER_ADDR", "h"},
                     {"MASTER_PORT", "1"}})
                .find("--nproc-per-node 1"),
            std::string::npos);
  EXPECT_NE(ErrorOf({{"SLURM_PROCID", "0"},
                     {"SLURM_NTASKS", "8"},
                     {"SLURM_NNODES", "2"},
                     {"SLURM_JOB_NODELIST", "h[1-2]"}})
                .find("--ntasks-per-node=1"),
            std::string::npos);
  EXPECT_EQ(ErrorOf({{"RANK", "one"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}}),
            "RANK = 'one': not an integer >= 0");
  EXPECT_NE(ErrorOf({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}}).find("MASTER_PORT"),
            std::string::npos);
}

}  // namespace
}  // namespace up
