// Control messages: every message round-trips; malformed input is an error,
// never a crash or a huge allocation; the launcher's handshake check.
#include "ipc/control_protocol.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>

#include "common/base/errors.h"
#include "launcher/handshake.h"

namespace up::ipc {
namespace {

TEST(ControlProtocol, MessagesRoundTrip) {
  Hello h{kProtocolVersion, "decoder", 4242, "abc", "bottleneck:1x2:f32", {}};
  Hello h2 = DecodeHello(Encode(h));
  EXPECT_EQ(h2.stage, "decoder");
  EXPECT_EQ(h2.pid, 4242);
  EXPECT_EQ(h2.config_sha256, "abc");
  EXPECT_EQ(h2.boundary_signature, h.boundary_signature);

  TurnRequest t{
      7, {{Op::kForwardBackward, 0}, {Op::kForwardBackward, 1}, {Op::kStep, -1}}, {1.5f, 2.5f}};
  TurnRequest t2 = DecodeTurn(Encode(t));
  EXPECT_EQ(t2.step, 7);
  EXPECT_EQ(t2.actions, t.actions);
  EXPECT_EQ(t2.all_norms, t.all_norms);

  TurnReport r;
  r.step = 3;
  r.busy_s = 0.25;
  r.loss = 1.125;
  r.dice_counts = {1, 2, 3};
  r.norms = {0.5f};
  r.rss_bytes = 99;
  r.device_peak_bytes = 7;
  TurnReport r2 = DecodeTurnDone(Encode(r));
  EXPECT_EQ(r2.loss, 1.125);
  EXPECT_EQ(r2.dice_counts, r.dice_counts);
  EXPECT_EQ(r2.norms, r.norms);
  EXPECT_EQ(r2.rss_bytes, 99);
  EXPECT_EQ(r2.device_peak_bytes, 7);

  EXPECT_TRUE(r2.val_counts.empty());

  // Validation: its actions and the decoder's counts of the cases it finished.
  TurnRequest v{3, {{Op::kValPredict, 0}, {Op::kValPredict, 1}}, {}};
  EXPECT_EQ(DecodeTurn(Encode(v)).actions, v.actions);
  EXPECT_EQ(ActionsText(v.actions), "VP0 VP1");
  EXPECT_EQ(ActionName({Op::kValForward, 4}), "VF4");
  TurnReport vr;
  vr.val_counts = {1, 2, 3, 4, 5, 6};
  vr.val_cases = 2;
  const TurnReport vr2 = DecodeTurnDone(Encode(vr));
  EXPECT_EQ(vr2.val_counts, vr.val_counts);
  EXPECT_EQ(vr2.val_cases, 2);
  vr.val_cases = 4;  // 6 counts do not split into 4 cases
  EXPECT_THROW(DecodeTurnDone(Encode(vr)), RuntimeError);

  EXPECT_EQ(DecodeSave(Encode(SaveRequest{5, "/x/encoder.pt"})).path, "/x/encoder.pt");
  EXPECT_EQ(DecodeSaved(EncodeSaved(5)), 5);
  EXPECT_EQ(DecodeBye(Encode(ByeReport{1234, 56})).peak_rss_bytes, 1234);
  EXPECT_EQ(DecodeBye(Encode(ByeReport{1234, 56})).device_peak_bytes, 56);
  EXPECT_EQ(DecodeReject(EncodeReject("no")), "no");
  EXPECT_EQ(DecodeFailed(Encode(Failure{2, "bad"})).message, "bad");
}

TEST(ControlProtocol, TruncatedOrWrongTypeIsAnError) {
  ControlMessage m = Encode(TurnRequest{1, {{Op::kForward, 0}}, {}});
  m.payload.resize(m.payload.size() - 3);
  EXPECT_THROW(DecodeTurn(m), RuntimeError);
  EXPECT_THROW(DecodeTurn(EncodeSaved(1)), RuntimeError);
  ControlMessage bad_op = Encode(TurnRequest{1, {{Op::kForward, 0}}, {}});
  bad_op.payload[12] = 77;  // the first action's op
  EXPECT_THROW(DecodeTurn(bad_op), RuntimeError);
}

TEST(ControlProtocol, HugeCountsAreRejectedBeforeAllocating) {
  ControlMessage m = Encode(TurnRequest{1, {}, {}});
  m.payload[8] = '\xff';
  m.payload[9] = '\xff';
  m.payload[10] = '\xff';
  m.payload[11] = '\x7f';
  EXPECT_THROW(DecodeTurn(m), RuntimeError);
}

TEST(ControlProtocol, FailedMessageBecomesTheStagesError) {
  try {
    ExpectType(Encode(Failure{2, "data.path: missing"}), MsgType::kTurnDone, "encoder");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("data.path: missing"), std::string::npos);
  }
  EXPECT_THROW(ExpectType(Encode(Failure{1, "x"}), MsgType::kTurnDone, "encoder"), RuntimeError);
  EXPECT_THROW(ExpectType(Encode(ByeReport{1, 0}), MsgType::kTurnDone, "encoder"), RuntimeError);
}

TEST(Handshake, NamesWhatDiffers) {
  Hello h{kProtocolVersion, "encoder", 1, "sha-a", "b:1", {}};
  EXPECT_EQ(HandshakeProblem(h, "sha-a", "b:1"), "");
  EXPECT_NE(HandshakeProblem(h, "sha-b", "b:1").find("different config"), std::string::npos);
  EXPECT_NE(HandshakeProblem(h, "sha-a", "b:2").find("boundary"), std::string::npos);
  h.protocol = 99;
  EXPECT_NE(HandshakeProblem(h, "sha-a", "b:1").find("protocol 99"), std::string::npos);
}

// A stage file crossing nodes: chunked, reassembled exactly, bounded.
TEST(FileTransfer, ChunkedFileArrivesExactlyAndIsBounded) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  ControlChannel a = ControlChannel::Adopt(fds[0], "a");
  ControlChannel b = ControlChannel::Adopt(fds[1], "b");
  char dir[] = "/tmp/up-filetest-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string src = std::string(dir) + "/src.bin", dst = std::string(dir) + "/dst.bin";
  std::string data(kFileChunkBytes * 2 + 12345, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>((i * 2654435761u) >> 13);
  { std::ofstream(src, std::ios::binary) << data; }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  auto sending = std::async(std::launch::async, [&] { SendFile(a, src); });
  ReceiveFile(b, dst, data.size(), deadline);
  sending.get();
  std::ifstream in(dst, std::ios::binary);
  const std::string got((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(got == data) << "received " << got.size() << " bytes of " << data.size();

  // One byte over the bound: refused, and nothing is written.
  auto again = std::async(std::launch::async, [&] { SendFile(a, src); });
  EXPECT_THROW(ReceiveFile(b, std::string(dir) + "/over.bin", data.size() - 1, deadline),
               RuntimeError);
  EXPECT_FALSE(std::filesystem::exists(std::string(dir) + "/over.bin"));
  again.wait();
  std::filesystem::remove_all(dir);
}

TEST(FileTransfer, WelcomeFlagAndChunkRoundTrip) {
  EXPECT_FALSE(DecodeWelcome(EncodeWelcome()));
  EXPECT_TRUE(DecodeWelcome(EncodeWelcome(true)));
  const FileChunk c = DecodeFileChunk(Encode(FileChunk{true, "abc"}));
  EXPECT_TRUE(c.last);
  EXPECT_EQ(c.bytes, "abc");
  ControlMessage bad = Encode(FileChunk{false, "abc"});
  bad.payload[0] = 7;  // last flag must be 0 or 1
  EXPECT_THROW(DecodeFileChunk(bad), RuntimeError);
}

}  // namespace
}  // namespace up::ipc
