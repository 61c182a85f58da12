// Durable file-system helpers: whole-file atomic writes (temporary name,
// fsync, rename, fsync of the directory) and fsync of existing paths.
// Failures are up::RuntimeError naming the path and the OS reason.
#pragma once

#include <string>
#include <utility>

namespace up {

// Writes `bytes` to `path` so that a crash leaves either the old file or the
// whole new one, never a torn one.
void WriteFileAtomic(const std::string& path, const std::string& bytes);

// Reads a whole file; throws UsageError when it cannot be read.
std::string ReadFile(const std::string& path);

// The last non-empty line of the file at `path` (a child process's output,
// whose last line says why it failed); "" when there is none or no file.
std::string LastLineOf(const std::string& path);

// Removes `path` (a file, or a folder with all it holds) when it goes out of
// scope, quietly: a staging folder that a failure must not leave behind (one
// renamed into place before then is gone from `path` already).
class RemoveOnExit {
 public:
  explicit RemoveOnExit(std::string path) : path_(std::move(path)) {}
  ~RemoveOnExit();
  RemoveOnExit(const RemoveOnExit&) = delete;
  RemoveOnExit& operator=(const RemoveOnExit&) = delete;

 private:
  std::string path_;
};

// fsync() of a file or directory (directories make renames durable).
void FsyncPath(const std::string& path);

}  // namespace up
