// Leftovers of dead runs. Every run names its shared-memory segments and its
// socket folder `up-<launcher pid>-<run id>...`; a launcher killed with
// SIGKILL cannot remove them, so the next launcher does: anything of that
// form whose launcher pid no longer exists is removed (a live pid, even an
// unrelated process that reused it, is left alone).
#pragma once

#include <sys/types.h>
#include <string>
#include <vector>

namespace up {

// "up-<pid>-<run id hex>": the prefix of every name a run creates.
std::string RunNamePrefix(pid_t launcher_pid, const std::string& run_id_hex);

// Removes leftovers in `shm_dir` (segments) and `tmp_dir` (socket folders);
// returns what it removed.
std::vector<std::string> RemoveStaleRuns(const std::string& shm_dir = "/dev/shm",
                                         const std::string& tmp_dir = "/tmp");

}  // namespace up
