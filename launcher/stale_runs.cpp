// See stale_runs.h.
#include "launcher/stale_runs.h"

#include <signal.h>

#include <cctype>
#include <cerrno>
#include <filesystem>

namespace up {
namespace {

namespace fs = std::filesystem;

// The launcher pid in "up-<pid>-<32 hex>..."; -1 when the name is not a run's.
pid_t LauncherPidOf(const std::string& name) {
  if (name.rfind("up-", 0) != 0) return -1;
  size_t i = 3;
  pid_t pid = 0;
  while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i]))) {
    pid = pid * 10 + (name[i] - '0');
    if (pid > 1 << 30) return -1;
    ++i;
  }
  if (i == 3 || i >= name.size() || name[i] != '-' || name.size() < i + 33) return -1;
  for (size_t k = i + 1; k < i + 33; ++k) {
    if (!std::isxdigit(static_cast<unsigned char>(name[k]))) return -1;
  }
  return pid;
}

bool Dead(pid_t pid) { return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH; }

}  // namespace

std::string RunNamePrefix(pid_t launcher_pid, const std::string& run_id_hex) {
  return "up-" + std::to_string(launcher_pid) + "-" + run_id_hex;
}

std::vector<std::string> RemoveStaleRuns(const std::string& shm_dir, const std::string& tmp_dir) {
  std::vector<std::string> removed;
  for (const std::string& dir : {shm_dir, tmp_dir}) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      const std::string name = entry.path().filename().string();
      if (!Dead(LauncherPidOf(name))) continue;
      std::error_code rm;
      fs::remove_all(entry.path(), rm);
      if (!rm) removed.push_back(entry.path().string());
    }
  }
  return removed;
}

}  // namespace up
