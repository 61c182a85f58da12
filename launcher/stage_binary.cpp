// See stage_binary.h.
#include "launcher/stage_binary.h"

#include <unistd.h>

#include <filesystem>

#include "common/base/errors.h"
#include "ipc/control_channel.h"
#include "launcher/stale_runs.h"

namespace up {

namespace fs = std::filesystem;

std::string StageBinary(const std::string& name) {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  const std::string path = ((ec ? fs::path(".") : self.parent_path()) / name).string();
  if (access(path.c_str(), X_OK) != 0) {
    throw UsageError("stage binary '" + path +
                     "' is missing or not executable; build it (scripts/build.sh) next to " +
                     "unet-pipeline");
  }
  return path;
}

RunScratchDir::RunScratchDir(const std::string& run_id_hex)
    : path_(ipc::MakePrivateRunDir(RunNamePrefix(getpid(), run_id_hex))) {}

RunScratchDir::~RunScratchDir() { ipc::RemoveTree(path_); }

}  // namespace up
