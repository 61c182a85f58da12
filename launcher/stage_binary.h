// What a launcher needs to start stage processes, on node 0 and on the other
// nodes alike: the stage binaries next to its own, and a private folder for
// a run's sockets and scratch files that is removed however the run ends.
#pragma once

#include <string>

namespace up {

// The path of `name` (encoder_proc, decoder_proc) in the launcher's folder;
// UsageError when it is missing or not executable.
std::string StageBinary(const std::string& name);

// /tmp/up-<launcher pid>-<run id>-XXXXXX, mode 0700, removed by the
// destructor (and by the next launcher if this one is killed: stale_runs.h).
class RunScratchDir {
 public:
  explicit RunScratchDir(const std::string& run_id_hex);
  ~RunScratchDir();
  RunScratchDir(const RunScratchDir&) = delete;
  RunScratchDir& operator=(const RunScratchDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace up
