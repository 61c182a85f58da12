// Tests for ChildProcess: exit codes, signals, the destructor's kill and
// reap, missing or unrunnable executables, Wait deadlines, PR_SET_PDEATHSIG
// when the spawning process dies, peak RSS, arguments and environment.
//
// The death-signal test forks an intermediate process that spawns a
// grandchild and _exit()s; this test process becomes a child subreaper for
// that test only, so it can reap the orphaned grandchild and see its signal.
#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "common/base/child_process.h"
#include "common/base/errors.h"

namespace up {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

Clock::time_point In(milliseconds ms) { return Clock::now() + ms; }
constexpr milliseconds kLong(5000);

ChildOptions Shell(const std::string& script) {
  return {"shell", "/bin/sh", {"-c", script}, {}, true, ""};
}
ChildOptions Sleep30() { return {"sleeper", "/bin/sleep", {"30"}, {}, true, ""}; }

bool ProcessGone(pid_t pid) { return ::kill(pid, 0) == -1 && errno == ESRCH; }

TEST(ChildProcessTest, ReportsTheExitCode) {
  ChildProcess child = ChildProcess::Spawn(Shell("exit 3"));
  EXPECT_GT(child.pid(), 0);
  EXPECT_EQ(child.name(), "shell");
  const ExitStatus status = child.Wait(In(kLong));
  EXPECT_TRUE(status.exited);
  EXPECT_EQ(status.code, 3);
  EXPECT_FALSE(status.success());
  EXPECT_EQ(status.Describe(), "exited with code 3");
  EXPECT_FALSE(child.running());
  ASSERT_TRUE(child.Poll().has_value());
  EXPECT_EQ(child.Poll()->code, 3);  // cached
}

TEST(ChildProcessTest, KillReportsTheSignal) {
  ChildProcess child = ChildProcess::Spawn(Sleep30());
  EXPECT_TRUE(child.running());
  EXPECT_FALSE(child.Poll().has_value());
  child.Kill();
  const ExitStatus status = child.Wait(In(kLong));
  EXPECT_FALSE(status.exited);
  EXPECT_EQ(status.signal, SIGKILL);
  EXPECT_EQ(status.Describe(), "killed by signal 9 (SIGKILL)");
  child.Kill();  // no-op once reaped
  EXPECT_TRUE(ProcessGone(child.pid()));
}

TEST(ChildProcessTest, DestructorKillsAndReapsARunningChild) {
  pid_t pid = -1;
  const auto start = Clock::now();
  {
    ChildProcess child = ChildProcess::Spawn(Sleep30());
    pid = child.pid();
    EXPECT_FALSE(ProcessGone(pid));
  }
  EXPECT_TRUE(ProcessGone(pid));  // not even a zombie
  EXPECT_LT(Clock::now() - start, milliseconds(2000));
}

TEST(ChildProcessTest, MoveKeepsOneOwner) {
  ChildProcess a = ChildProcess::Spawn(Sleep30());
  const pid_t pid = a.pid();
  ChildProcess b = std::move(a);
  EXPECT_EQ(b.pid(), pid);
  EXPECT_EQ(a.pid(), -1);  // NOLINT(bugprone-use-after-move): checking the moved-from state
  EXPECT_TRUE(b.running());
  ChildProcess c = ChildProcess::Spawn(Shell("exit 0"));
  const pid_t replaced = c.pid();
  c = std::move(b);  // reaps the old c
  EXPECT_EQ(c.pid(), pid);
  EXPECT_TRUE(ProcessGone(replaced));
}

TEST(ChildProcessTest, MissingExecutableIsUsageErrorNamingThePath) {
  const std::string path = "/nonexistent/build/bin/encoder_proc";
  try {
    ChildProcess::Spawn({"encoder", path, {}, {}, true, ""});
    FAIL() << "no error";
  } catch (const UsageError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_NE(what.find("encoder"), std::string::npos) << what;
    EXPECT_NE(what.find("build"), std::string::npos) << what;
  }
  EXPECT_THROW(ChildProcess::Spawn({"dir", "/tmp", {}, {}, true, ""}), UsageError);
  EXPECT_THROW(ChildProcess::Spawn({"empty", "", {}, {}, true, ""}), UsageError);
}

TEST(ChildProcessTest, ExecFailureInTheChildIsReportedBySpawn) {
  // Executable bit set but no valid format: execve fails with ENOEXEC.
  char path[] = "/tmp/up-child-test-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "not a program\n", 14), 14);
  ::close(fd);
  ASSERT_EQ(::chmod(path, 0700), 0);
  try {
    ChildProcess::Spawn({"decoder", path, {}, {}, true, ""});
    ADD_FAILURE() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("could not be executed"), std::string::npos) << e.what();
  }
  ::unlink(path);
}

TEST(ChildProcessTest, WaitPastTheDeadlineIsTimeoutError) {
  ChildProcess child = ChildProcess::Spawn(Sleep30());
  const auto start = Clock::now();
  try {
    child.Wait(start + milliseconds(100));
    FAIL() << "no timeout";
  } catch (const TimeoutError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("sleeper"), std::string::npos) << what;
    EXPECT_NE(what.find("100 ms"), std::string::npos) << what;
  }
  const auto elapsed = Clock::now() - start;
  EXPECT_GE(elapsed, milliseconds(100));
  EXPECT_LT(elapsed, milliseconds(600));
  EXPECT_TRUE(child.running());
}

TEST(ChildProcessTest, ChildDiesWithTheProcessThatSpawnedIt) {
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t middle = ::fork();
  ASSERT_GE(middle, 0);
  if (middle == 0) {
    ::close(fds[0]);
    try {
      ChildProcess grandchild = ChildProcess::Spawn(Sleep30());
      const pid_t pid = grandchild.pid();
      if (::write(fds[1], &pid, sizeof(pid)) != sizeof(pid)) ::_exit(2);
      ::_exit(0);  // no destructors: only the death signal can end the grandchild
    } catch (...) {
      ::_exit(1);
    }
  }
  ::close(fds[1]);
  pid_t grandchild = -1;
  ASSERT_EQ(::read(fds[0], &grandchild, sizeof(grandchild)), static_cast<ssize_t>(sizeof(pid_t)));
  ::close(fds[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(middle, &status, 0), middle);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  // Orphaned, it was reparented to us (the subreaper): reap it.
  const auto deadline = In(milliseconds(1000));
  pid_t reaped = 0;
  while (reaped == 0 && Clock::now() < deadline) {
    reaped = ::waitpid(grandchild, &status, WNOHANG);
    if (reaped == 0) std::this_thread::sleep_for(milliseconds(5));
  }
  if (reaped == 0) ::kill(grandchild, SIGKILL);
  ::prctl(PR_SET_CHILD_SUBREAPER, 0);
  ASSERT_EQ(reaped, grandchild) << "the grandchild outlived its parent by over 1 s";
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

TEST(ChildProcessTest, PeakRssIsKnownOnceReaped) {
  ChildProcess child = ChildProcess::Spawn(Shell("exit 0"));
  child.Wait(In(kLong));
  EXPECT_GT(child.peak_rss_bytes(), 0);
  EXPECT_TRUE(child.Wait(In(kLong)).success());
  ChildProcess running = ChildProcess::Spawn(Sleep30());
  EXPECT_EQ(running.peak_rss_bytes(), 0);
}

TEST(ChildProcessTest, PassesArgumentsAndEnvironment) {
  ASSERT_EQ(::setenv("UP_CHILD_TEST_OLD", "old", 1), 0);
  ChildOptions options = Shell(
      "[ \"$UP_CHILD_TEST_NEW\" = 'a b' ] && [ \"$UP_CHILD_TEST_OLD\" = new ] && "
      "[ -n \"$PATH\" ] && [ \"$0\" = argzero ] && exit 7; exit 1");
  options.args.push_back("argzero");
  options.extra_env = {{"UP_CHILD_TEST_NEW", "a b"}, {"UP_CHILD_TEST_OLD", "new"}};
  ChildProcess child = ChildProcess::Spawn(options);
  EXPECT_EQ(child.Wait(In(kLong)).code, 7);
  ::unsetenv("UP_CHILD_TEST_OLD");
  options.extra_env = {{"BAD=NAME", "x"}};
  EXPECT_THROW(ChildProcess::Spawn(options), UsageError);
}

TEST(ChildProcessTest, ChildStartsWithAnEmptySignalMask) {
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGTERM);
  ASSERT_EQ(::pthread_sigmask(SIG_BLOCK, &block, &old), 0);
  ChildProcess child = ChildProcess::Spawn(Sleep30());
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  child.Kill(SIGTERM);
  const ExitStatus status = child.Wait(In(kLong));
  EXPECT_EQ(status.signal, SIGTERM);
  EXPECT_EQ(status.Describe(), "killed by signal 15 (SIGTERM)");
}

TEST(ChildProcessTest, PidfdBecomesReadableWhenTheChildEnds) {
  ChildProcess child = ChildProcess::Spawn(Shell("exit 0"));
  if (child.pidfd() < 0) GTEST_SKIP() << "no pidfd_open on this kernel";
  pollfd p{child.pidfd(), POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 5000), 1);
  EXPECT_TRUE(child.Wait(In(kLong)).success());
}

TEST(ChildProcessTest, OutputFileTakesStdoutAndStderr) {
  char dir[] = "/tmp/up-child-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string file = std::string(dir) + "/out.log";
  ChildOptions o = Shell("echo to-stdout; echo to-stderr >&2; exit 4");
  o.output_file = file;
  ChildProcess child = ChildProcess::Spawn(o);
  const ExitStatus status = child.Wait(std::chrono::steady_clock::now() + std::chrono::seconds(10));
  EXPECT_EQ(status.code, 4);
  std::ifstream in(file);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "to-stdout\nto-stderr\n");
  std::remove(file.c_str());
  rmdir(dir);
  // An output file that cannot be opened is an error before any child starts.
  ChildOptions bad = Shell("exit 0");
  bad.output_file = "/nonexistent-dir/out.log";
  EXPECT_THROW(ChildProcess::Spawn(bad), RuntimeError);
}

}  // namespace
}  // namespace up
