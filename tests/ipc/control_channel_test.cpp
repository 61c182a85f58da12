// Tests for ControlChannel, ControlListener and the helpers: round trips in
// both directions (empty and 1 MiB payloads), many frames in one read, frames
// split across reads, timeouts, a peer that closes or dies mid-frame, forged
// headers, oversize sends, socket permissions and cleanup, late listeners,
// long paths and WaitReadable.
//
// Each test gets its own private directory (removed in TearDown). Forked
// children use raw socket calls only and leave with _exit().
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/base/errors.h"
#include "ipc/control_channel.h"

namespace up::ipc {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

Clock::time_point In(milliseconds ms) { return Clock::now() + ms; }
constexpr milliseconds kLong(5000);

std::string Frame(uint32_t magic, uint32_t type, uint64_t length, const std::string& payload) {
  std::string bytes(kControlHeaderBytes, '\0');
  std::memcpy(&bytes[0], &magic, 4);
  std::memcpy(&bytes[4], &type, 4);
  std::memcpy(&bytes[8], &length, 8);
  return bytes + payload;
}

void WriteAll(int fd, const std::string& bytes) {
  ASSERT_EQ(::write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
}

std::string Pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + 7) % 251);
  return s;
}

class ControlChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakePrivateRunDir("up-ctl-test");
    path_ = dir_ + "/ctl.sock";
  }
  void TearDown() override { RemoveTree(dir_); }

  // A connected pair through a listener: {accepted side, connecting side}.
  std::pair<ControlChannel, ControlChannel> Pair() {
    ControlListener listener = ControlListener::Listen(path_);
    ControlChannel client = ControlChannel::Connect(path_, In(kLong));
    ControlChannel server = listener.Accept(In(kLong));
    return {std::move(server), std::move(client)};
  }

  std::string dir_;
  std::string path_;
};

TEST_F(ControlChannelTest, RoundTripsInBothDirections) {
  const std::vector<ControlMessage> sent = {{1, "hello"}, {2, ""}, {3, Pattern(1 << 20)}};
  ControlListener listener = ControlListener::Listen(path_);
  auto client = std::async(std::launch::async, [&] {
    ControlChannel ch = ControlChannel::Connect(path_, In(kLong));
    ch.set_peer_name("launcher");
    for (const auto& m : sent) ch.Send(m);
    for (const auto& m : sent) {
      const ControlMessage echo = ch.Receive(In(kLong));
      EXPECT_EQ(echo.type, m.type + 100);
      EXPECT_TRUE(echo.payload == m.payload) << "type " << m.type;
    }
  });
  ControlChannel server = listener.Accept(In(kLong));
  server.set_peer_name("encoder");
  for (const auto& m : sent) {
    ControlMessage got = server.Receive(In(kLong));
    EXPECT_EQ(got.type, m.type);
    EXPECT_EQ(got.payload.size(), m.payload.size());
    EXPECT_TRUE(got.payload == m.payload);
    got.type += 100;
    server.Send(got);
  }
  client.get();
}

TEST_F(ControlChannelTest, ManyFramesInOneReadComeOutOneByOne) {
  auto [server, client] = Pair();
  for (uint32_t i = 0; i < 200; ++i) client.Send({i, "message " + std::to_string(i)});
  EXPECT_TRUE(server.HasData());
  for (uint32_t i = 0; i < 200; ++i) {
    EXPECT_TRUE(server.HasData()) << i;
    const ControlMessage m = server.Receive(In(kLong));
    EXPECT_EQ(m.type, i);
    EXPECT_EQ(m.payload, "message " + std::to_string(i));
  }
  EXPECT_FALSE(server.HasData());
}

TEST_F(ControlChannelTest, FrameSplitAcrossReadsIsReassembled) {
  auto [server, client] = Pair();
  const std::string frame = Frame(kControlMagic, 9, 6, "abcdef");
  WriteAll(client.fd(), frame.substr(0, 5));
  EXPECT_THROW(server.Receive(In(milliseconds(20))), TimeoutError);
  WriteAll(client.fd(), frame.substr(5, 14));
  EXPECT_THROW(server.Receive(In(milliseconds(20))), TimeoutError);
  WriteAll(client.fd(), frame.substr(19) + Frame(kControlMagic, 10, 0, ""));
  const ControlMessage m = server.Receive(In(kLong));
  EXPECT_EQ(m.type, 9u);
  EXPECT_EQ(m.payload, "abcdef");
  EXPECT_EQ(server.Receive(In(kLong)).type, 10u);
}

TEST_F(ControlChannelTest, ReceiveTimesOutNearTheDeadline) {
  auto [server, client] = Pair();
  server.set_peer_name("decoder");
  const auto start = Clock::now();
  try {
    server.Receive(start + milliseconds(100));
    FAIL() << "no timeout";
  } catch (const TimeoutError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("decoder"), std::string::npos) << what;
    EXPECT_NE(what.find("100 ms"), std::string::npos) << what;
  }
  const auto elapsed = Clock::now() - start;
  EXPECT_GE(elapsed, milliseconds(100));
  EXPECT_LT(elapsed, milliseconds(600));
}

TEST_F(ControlChannelTest, PeerCloseIsPeerGone) {
  auto [server, client] = Pair();
  server.set_peer_name("encoder");
  client.Send({4, "last words"});
  { ControlChannel gone = std::move(client); }
  EXPECT_EQ(server.Receive(In(kLong)).payload, "last words");  // buffered data first
  EXPECT_TRUE(server.HasData());
  try {
    server.Receive(In(kLong));
    FAIL() << "no error";
  } catch (const PeerGoneError& e) {
    EXPECT_EQ(std::string(e.what()), "encoder closed the connection");
  }
  EXPECT_THROW(server.Receive(In(kLong)), PeerGoneError);  // and stays so
  EXPECT_THROW(server.Send({1, "x"}), PeerGoneError);
}

TEST_F(ControlChannelTest, PeerDyingMidFrameIsPeerGoneNotAHang) {
  ControlListener listener = ControlListener::Listen(path_);
  const std::string half = Frame(kControlMagic, 1, 100, std::string(40, 'x'));
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strcpy(addr.sun_path, path_.c_str());
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) ::_exit(2);
    if (::write(fd, half.data(), half.size()) != static_cast<ssize_t>(half.size())) ::_exit(3);
    ::_exit(0);
  }
  ControlChannel server = listener.Accept(In(kLong));
  const auto start = Clock::now();
  try {
    server.Receive(In(kLong));
    FAIL() << "no error";
  } catch (const PeerGoneError& e) {
    EXPECT_NE(std::string(e.what()).find("middle of a message"), std::string::npos) << e.what();
  }
  EXPECT_LT(Clock::now() - start, milliseconds(2000));
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST_F(ControlChannelTest, OversizeLengthHeaderIsRejectedBeforeAllocating) {
  auto [server, client] = Pair();
  // 1 TiB: allocating it would throw bad_alloc, not RuntimeError.
  WriteAll(client.fd(), Frame(kControlMagic, 1, uint64_t{1} << 40, ""));
  try {
    server.Receive(In(kLong));
    FAIL() << "no error";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("malformed"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("1099511627776"), std::string::npos) << e.what();
  }
}

TEST_F(ControlChannelTest, OneByteOverTheLimitIsRejected) {
  auto [server, client] = Pair();
  WriteAll(client.fd(), Frame(kControlMagic, 1, kMaxControlPayload + 1, ""));
  EXPECT_THROW(server.Receive(In(kLong)), RuntimeError);
}

TEST_F(ControlChannelTest, BadMagicIsMalformed) {
  auto [server, client] = Pair();
  WriteAll(client.fd(), Frame(0x12345678, 1, 0, ""));
  EXPECT_TRUE(server.HasData());
  try {
    server.Receive(In(kLong));
    FAIL() << "no error";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("bad magic 0x12345678"), std::string::npos) << e.what();
  }
}

TEST_F(ControlChannelTest, OversizeSendIsUsageError) {
  auto [server, client] = Pair();
  ControlMessage big{7, std::string(kMaxControlPayload + 1, 'z')};
  EXPECT_THROW(client.Send(big), UsageError);
  EXPECT_FALSE(server.HasData());  // nothing was written
}

TEST_F(ControlChannelTest, SocketIsOwnerOnlyAndRemovedByTheListener) {
  struct stat st {};
  ASSERT_EQ(::stat(dir_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  {
    ControlListener listener = ControlListener::Listen(path_);
    ControlListener moved = std::move(listener);
    ASSERT_EQ(::stat(path_.c_str(), &st), 0);
    EXPECT_TRUE(S_ISSOCK(st.st_mode));
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    EXPECT_THROW(ControlListener::Listen(path_), RuntimeError);  // exists
  }
  EXPECT_EQ(::stat(path_.c_str(), &st), -1);
  EXPECT_EQ(errno, ENOENT);
}

TEST_F(ControlChannelTest, ConnectRetriesUntilTheListenerAppears) {
  auto late = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(milliseconds(100));
    ControlListener listener = ControlListener::Listen(path_);
    ControlChannel server = listener.Accept(In(kLong));
    return server.Receive(In(kLong)).payload;
  });
  const auto start = Clock::now();
  ControlChannel client = ControlChannel::Connect(path_, In(kLong));
  EXPECT_GE(Clock::now() - start, milliseconds(90));
  client.Send({1, "finally"});
  EXPECT_EQ(late.get(), "finally");
}

TEST_F(ControlChannelTest, ConnectAndAcceptTimeOut) {
  try {
    ControlChannel::Connect(path_, In(milliseconds(50)));
    FAIL() << "no timeout";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find(path_), std::string::npos) << e.what();
  }
  ControlListener listener = ControlListener::Listen(path_);
  EXPECT_THROW(listener.Accept(In(milliseconds(50))), TimeoutError);
}

TEST_F(ControlChannelTest, TooLongPathIsUsageError) {
  const std::string path = dir_ + "/" + std::string(120, 's');
  try {
    ControlListener::Listen(path);
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("107"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ControlChannel::Connect(path, In(kLong)), UsageError);
  EXPECT_THROW(MakePrivateRunDir("a/b"), UsageError);
}

TEST_F(ControlChannelTest, WaitReadableReportsTheReadyIndex) {
  auto [a_server, a_client] = Pair();
  auto [b_server, b_client] = Pair();
  const std::vector<int> fds = {a_server.fd(), -1, b_server.fd()};
  const auto start = Clock::now();
  EXPECT_EQ(WaitReadable(fds, start + milliseconds(50)), -1);
  EXPECT_GE(Clock::now() - start, milliseconds(50));
  EXPECT_EQ(WaitReadable(fds, Clock::now() - milliseconds(1)), -1);  // past deadline
  b_client.Send({1, "b"});
  EXPECT_EQ(WaitReadable(fds, In(kLong)), 2);
  { ControlChannel closed = std::move(a_client); }  // hang-up counts as ready
  EXPECT_EQ(WaitReadable(fds, In(kLong)), 0);
}

TEST_F(ControlChannelTest, AdoptWorksOnASocketpair) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  ControlChannel a = ControlChannel::Adopt(sv[0], "a");
  ControlChannel b = ControlChannel::Adopt(sv[1], "b");
  a.Send({5, "pair"});
  EXPECT_EQ(b.Receive(In(kLong)).payload, "pair");
  EXPECT_THROW(ControlChannel::Adopt(-1), UsageError);
}

// A stage on another node reaches the launcher over TCP: same frames.
TEST(ControlTcp, ListenOnLoopbackConnectAndRoundTrip) {
  ControlListener listener = ControlListener::ListenTcp("127.0.0.1");
  const std::string endpoint = listener.endpoint();
  ASSERT_EQ(endpoint.rfind("tcp:127.0.0.1:", 0), 0u) << endpoint;
  EXPECT_TRUE(listener.path().empty());
  auto peer = std::async(std::launch::async, [&] {
    ControlChannel c = ControlChannel::ConnectTo(endpoint, In(kLong));
    c.Send({42, std::string(3 << 20, 'x')});  // larger than one socket buffer
    return c.Receive(In(kLong)).payload;
  });
  ControlChannel server = listener.Accept(In(kLong));
  const ControlMessage m = server.Receive(In(kLong));
  EXPECT_EQ(m.type, 42u);
  EXPECT_EQ(m.payload.size(), 3u << 20);
  server.Send({43, "back"});
  EXPECT_EQ(peer.get(), "back");
}

TEST(ControlTcp, BadEndpointsAndAbsentListenersAreClearErrors) {
  EXPECT_THROW(ControlChannel::ConnectTo("tcp:127.0.0.1:0", In(kLong)), UsageError);
  EXPECT_THROW(ControlChannel::ConnectTo("tcp:127.0.0.1:notaport", In(kLong)), UsageError);
  EXPECT_THROW(ControlChannel::ConnectTo("tcp:no-such-host.invalid:80", In(kLong)), UsageError);
  // A port nobody listens on (taken from a listener that is then closed).
  std::string endpoint;
  { endpoint = ControlListener::ListenTcp("127.0.0.1").endpoint(); }
  const auto start = Clock::now();
  try {
    ControlChannel::ConnectTo(endpoint, In(milliseconds(300)));
    FAIL() << "connected to a closed port";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find(endpoint), std::string::npos) << e.what();
  }
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
}

}  // namespace
}  // namespace up::ipc
