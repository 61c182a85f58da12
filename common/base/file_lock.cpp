// See file_lock.h.
#include "common/base/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/base/errors.h"

namespace up {

FileLock::FileLock(const std::string& path, const std::function<void()>& on_wait) {
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw RuntimeError("cannot open lock file " + path + ": " + std::strerror(errno));
  int rc = ::flock(fd_, LOCK_EX | LOCK_NB);
  if (rc != 0 && errno == EWOULDBLOCK) {
    if (on_wait) on_wait();
    do {
      rc = ::flock(fd_, LOCK_EX);
    } while (rc != 0 && errno == EINTR);
  }
  if (rc != 0) {
    const int err = errno;
    ::close(fd_);
    throw RuntimeError("cannot lock " + path + ": " + std::strerror(err));
  }
}

FileLock::~FileLock() {
  ::flock(fd_, LOCK_UN);
  ::close(fd_);
}

}  // namespace up
