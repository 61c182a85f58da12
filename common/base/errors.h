// Typed errors shared by every process of unet-pipeline.
//
// Each `main` catches `up::Error`, prints its one-line message and exits with
// `exit_code()`: 2 for bad usage or bad input (the user can fix it), 1 for a
// runtime failure (a peer died, a timeout, an I/O error). Messages say what
// failed, the value that was wrong and what to do; they carry no trailing
// newline and no "error:" prefix (main adds it).
#pragma once

#include <stdexcept>
#include <string>

namespace up {

class Error : public std::runtime_error {
 public:
  Error(const std::string& what, int exit_code) : std::runtime_error(what), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

// Bad command line, config, data or checkpoint: exit code 2.
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& what) : Error(what, 2) {}
};

// A failure while running: exit code 1.
class RuntimeError : public Error {
 public:
  explicit RuntimeError(const std::string& what) : Error(what, 1) {}
};

// A wait that ran past its deadline.
class TimeoutError : public RuntimeError {
 public:
  explicit TimeoutError(const std::string& what) : RuntimeError(what) {}
};

// The process on the other side of a channel is gone (exited, killed, or the
// run was aborted by the launcher).
class PeerGoneError : public RuntimeError {
 public:
  explicit PeerGoneError(const std::string& what) : RuntimeError(what) {}
};

}  // namespace up
