// See fs_util.h.
#include "common/base/fs_util.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/base/errors.h"

namespace up {
namespace {

// What to do when a write fails for want of space.
std::string SpaceHint(int err, const std::string& path) {
  if (err != ENOSPC && err != EDQUOT && err != EFBIG) return "";
  std::string dir = std::filesystem::path(path).parent_path().string();
  return "; free space on the file system holding it (df -h " + (dir.empty() ? "." : dir) + ")";
}

}  // namespace

void FsyncPath(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw RuntimeError("cannot open '" + path + "' to sync it: " + std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) throw RuntimeError("fsync('" + path + "') failed: " + std::strerror(err));
}

void WriteFileAtomic(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    throw RuntimeError("cannot create '" + tmp + "': " + std::strerror(err) + SpaceHint(err, path));
  }
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw RuntimeError("cannot write '" + tmp + "': " + std::strerror(err) +
                         SpaceHint(err, path));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    throw RuntimeError("fsync('" + tmp + "') failed: " + std::strerror(err) + SpaceHint(err, path));
  }
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw RuntimeError("cannot write '" + tmp + "': " + std::strerror(err) + SpaceHint(err, path));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw RuntimeError("cannot rename '" + tmp + "' to '" + path + "': " + std::strerror(err));
  }
  std::string dir = std::filesystem::path(path).parent_path().string();
  FsyncPath(dir.empty() ? "." : dir);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError("cannot read '" + path + "': " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string LastLineOf(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last;
}

RemoveOnExit::~RemoveOnExit() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace up
