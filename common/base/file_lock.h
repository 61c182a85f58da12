// An exclusive lock on a file (flock), held while a FileLock lives: runs on
// one machine, or on nodes sharing a file system that honours flock, take
// turns at something they share (converting a dataset into one cache). The
// kernel releases it when the holder dies, so a crash never leaves it held.
#pragma once

#include <functional>
#include <string>

namespace up {

class FileLock {
 public:
  // Locks `path` (created if missing). When another process holds it,
  // calls `on_wait` once, then waits for it. RuntimeError naming the path
  // and the OS reason when the file cannot be opened or locked.
  explicit FileLock(const std::string& path, const std::function<void()>& on_wait = {});
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace up
