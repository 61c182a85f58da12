// The catalogue of bad inputs (docs/ERRORS.md), one test per row, each with
// the real `unet-pipeline` (or a real stage process): exit code 2 for bad
// usage or input, 1 for a runtime failure, exactly one error line that says
// what, which value and what to do, and nothing already saved lost.
// ErrorCatalogue.EveryRowNamesATestThatExists keeps the document true.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "common/base/sha256.h"
#include "common/formats/png_io.h"
#include "ipc/control_channel.h"
#include "ipc/control_protocol.h"
#include "ipc/shm_ring.h"
#include "tests/support/command.h"

namespace up::test {
namespace {

namespace fs = std::filesystem;

CommandResult Launch(std::vector<std::string> args) {
  args.insert(args.begin(), BinPath("unet-pipeline"));
  return RunCommand(args, 180);
}

// Exit `code`, one "unet-pipeline: error:" line containing `needle`, no crash
// text and no second error line from a stage.
void ExpectOneError(const CommandResult& r, int code, const std::string& needle) {
  EXPECT_EQ(r.exit_code, code) << r.output;
  std::istringstream lines(r.output);
  int errors = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("unet-pipeline: error: ", 0) == 0) {
      ++errors;
      EXPECT_NE(line.find(needle), std::string::npos) << "the error line: " << line;
    }
    EXPECT_EQ(line.find("] error:"), std::string::npos) << "a second error line: " << line;
    EXPECT_EQ(line.find("terminate called"), std::string::npos) << r.output;
    EXPECT_EQ(line.find("Exception raised from"), std::string::npos) << r.output;
  }
  EXPECT_EQ(errors, 1) << r.output;
}

// sha256 over every file of a run folder (names and bytes): equal before and
// after a failure means nothing saved was touched.
std::string Fingerprint(const std::string& run) {
  std::vector<std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(run)) {
    if (e.is_regular_file()) files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  std::string all;
  for (const std::string& f : files) {
    if (f.size() > 4 && f.substr(f.size() - 4) == ".log") continue;  // stage logs may grow
    all += f + "\n" + Sha256Hex(Slurp(f)) + "\n";
  }
  return Sha256Hex(all);
}

std::string WriteFile(const TempDir& dir, const std::string& name, const std::string& text) {
  std::ofstream(dir / name, std::ios::binary) << text;
  return dir / name;
}

std::vector<std::string> Tiny(const std::string& out, std::vector<std::string> sets = {}) {
  std::vector<std::string> args{"train", "--config", SourcePath("configs/tiny.yaml"), "--out", out};
  for (const std::string& s : sets) args.insert(args.end(), {"--set", s});
  return args;
}

// A run trained for `steps` steps with a checkpoint after each.
std::string TrainedRun(const TempDir& dir, int steps) {
  const std::string run = dir / "run";
  CommandResult r = Launch(Tiny(
      run, {"train.steps=" + std::to_string(steps), "checkpoint.every=1", "checkpoint.keep=5"}));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return run;
}

// ---- configs -----------------------------------------------------------------

TEST(ErrorCatalogue, MalformedYaml) {
  TempDir dir;
  const std::string config = WriteFile(dir, "bad.yaml", "model: {dims: 2\ntrain:\n  steps: 3\n");
  ExpectOneError(Launch({"train", "--config", config, "--out", dir / "run"}), 2, "bad.yaml");
  EXPECT_FALSE(fs::exists(dir / "run")) << "a failed start leaves no run folder";
}

TEST(ErrorCatalogue, EmptyYaml) {
  TempDir dir;
  const std::string config = WriteFile(dir, "empty.yaml", "");
  ExpectOneError(Launch({"train", "--config", config, "--out", dir / "run"}), 2, "empty");
  EXPECT_FALSE(fs::exists(dir / "run"));
}

TEST(ErrorCatalogue, UnknownKey) {
  TempDir dir;
  const std::string config = WriteFile(dir, "typo.yaml", "trian: {steps: 3}\n");
  ExpectOneError(Launch({"train", "--config", config, "--out", dir / "run"}), 2,
                 "did you mean 'train'");
}

TEST(ErrorCatalogue, WrongType) {
  TempDir dir;
  ExpectOneError(Launch(Tiny(dir / "run", {"train.steps=many"})), 2, "train.steps");
  ExpectOneError(Launch(Tiny(dir / "run", {"model.features=7"})), 2, "model.features");
  EXPECT_FALSE(fs::exists(dir / "run"));
}

TEST(ErrorCatalogue, OutOfRangeOnResumeKeepsTheRun) {
  TempDir dir;
  const std::string run = TrainedRun(dir, 1);
  const std::string before = Fingerprint(run);
  ExpectOneError(Launch({"train", "--resume", run, "--set", "train.lr=-1"}), 2, "train.lr");
  ExpectOneError(Launch({"train", "--resume", run, "--set", "pipeline.timeout_s=0"}), 2,
                 "pipeline.timeout_s");
  EXPECT_EQ(Fingerprint(run), before) << "a refused resume must not touch the run";
}

TEST(ErrorCatalogue, SizesNotDivisible) {
  TempDir dir;
  ExpectOneError(Launch(Tiny(dir / "run", {"train.micro_batches=3"})), 2, "train.micro_batches");
  ExpectOneError(Launch(Tiny(dir / "run", {"data.size=[60,60]"})), 2, "data.size");
}

TEST(ErrorCatalogue, OversizeConfigFile) {
  TempDir dir;
  const std::string config = WriteFile(dir, "huge.yaml", "# " + std::string(2 << 20, 'x') + "\n");
  ExpectOneError(Launch({"train", "--config", config, "--out", dir / "run"}), 2,
                 "larger than 1 MiB");
}

TEST(ErrorCatalogue, ResumeBeyondStepsKeepsTheRun) {
  TempDir dir;
  const std::string run = TrainedRun(dir, 2);
  const std::string before = Fingerprint(run);
  ExpectOneError(Launch({"train", "--resume", run, "--set", "train.steps=1"}), 2,
                 "raise it with --set train.steps=N");
  EXPECT_EQ(Fingerprint(run), before);
}

// ---- data --------------------------------------------------------------------

// A folder dataset for configs/tiny.yaml (64x64, 4 channels, 3 classes).
class FolderDataErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(dir_ / "data/images");
    fs::create_directories(dir_ / "data/masks");
    for (const char* name : {"a", "b"}) {
      WritePng(dir_ / ("data/images/" + std::string(name) + ".png"), Image(64, 64, 4, 100));
      WritePng(dir_ / ("data/masks/" + std::string(name) + ".png"), Image(64, 64, 1, 1));
    }
  }
  static PngImage Image(int w, int h, int channels, uint8_t value) {
    PngImage img;
    img.width = w;
    img.height = h;
    img.channels = channels;
    img.pixels.assign(static_cast<size_t>(w) * h * channels, value);
    return img;
  }
  CommandResult Train() {
    return Launch(
        Tiny(dir_ / "run", {"data.kind=folder", "data.path=" + (dir_ / "data"), "train.steps=1"}));
  }
  TempDir dir_;
};

TEST_F(FolderDataErrors, GoodFolderTrains) {
  CommandResult r = Train();
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST(ErrorCatalogue, MissingDataFolder) {
  TempDir dir;
  ExpectOneError(Launch(Tiny(dir / "run", {"data.kind=folder", "data.path=" + (dir / "nowhere")})),
                 2, "data.path = " + (dir / "nowhere"));
  EXPECT_FALSE(fs::exists(dir / "run"));
}

TEST_F(FolderDataErrors, CorruptDataFile) {
  WriteFile(dir_, "data/images/b.png", "\x89PNG\r\n\x1a\n but not really a PNG");
  ExpectOneError(Train(), 2, "b.png' is a corrupt or truncated PNG file");
  EXPECT_FALSE(fs::exists(dir_ / "run"));
}

TEST_F(FolderDataErrors, ImageWithoutMaskOrOfAnotherSize) {
  WritePng(dir_ / "data/masks/b.png", Image(32, 32, 1, 1));
  ExpectOneError(Train(), 2, "masks/b.png");
  fs::remove(dir_ / "data/masks/b.png");
  ExpectOneError(Train(), 2, "has no mask");
}

TEST_F(FolderDataErrors, WrongChannelCount) {
  WritePng(dir_ / "data/images/a.png", Image(64, 64, 3, 100));
  ExpectOneError(Train(), 2, "3 channels");
}

// A PNG whose header claims 1,000,000 x 1,000,000 pixels (valid CRC): refused
// from the header, before anything is allocated.
uint32_t Crc32(const std::string& bytes) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char c : bytes) {
    crc ^= c;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

TEST_F(FolderDataErrors, ImageHeaderClaimingAHugeSize) {
  std::string png = Slurp(dir_ / "data/images/a.png");
  auto put32 = [&](size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) png[at + i] = static_cast<char>(v >> (24 - 8 * i));
  };
  put32(16, 1000000);  // IHDR width
  put32(20, 1000000);  // IHDR height
  put32(29, Crc32(png.substr(12, 17)));
  WriteFile(dir_, "data/images/a.png", png);
  ExpectOneError(Train(), 2, "claims 1000000x1000000 pixels");
}

// ---- processes and checkpoints ------------------------------------------------------

// A stage built for another config: the launcher is a copy next to a wrapper
// `encoder_proc` that runs the real one on a changed config, so its Hello
// carries another config hash.
TEST(ErrorCatalogue, HandshakeMismatch) {
  TempDir dir;
  fs::create_directories(dir / "bin");
  fs::copy_file(BinPath("unet-pipeline"), dir / "bin/unet-pipeline");
  fs::permissions(dir / "bin/unet-pipeline", fs::perms::owner_all);
  fs::create_symlink(BinPath("decoder_proc"), dir / "bin/decoder_proc");
  WriteFile(dir, "bin/encoder_proc",
            "#!/bin/bash\n"
            "args=(\"$@\")\n"
            "for i in \"${!args[@]}\"; do\n"
            "  if [ \"${args[$i]}\" = --config ]; then\n"
            "    sed 's/^  seed: .*/  seed: 77/' \"${args[$((i+1))]}\" > " +
                (dir / "other.yaml") +
                "\n"
                "    args[$((i+1))]=" +
                (dir / "other.yaml") +
                "\n"
                "  fi\n"
                "done\n"
                "exec " +
                BinPath("encoder_proc") + " \"${args[@]}\"\n");
  fs::permissions(dir / "bin/encoder_proc", fs::perms::owner_all);
  CommandResult r =
      RunCommand({dir / "bin/unet-pipeline", "train", "--config", SourcePath("configs/tiny.yaml"),
                  "--out", dir / "run", "--set", "train.steps=1"});
  ExpectOneError(r, 2, "handshake with the encoder stage failed: it loaded a different config");
  EXPECT_FALSE(fs::exists(dir / "run/checkpoints/step-1"));
}

TEST(ErrorCatalogue, CorruptNewestCheckpointFallsBackWithAWarning) {
  TempDir dir;
  const std::string run = TrainedRun(dir, 2);
  std::string bytes = Slurp(run + "/checkpoints/step-2/decoder.pt");
  bytes[bytes.size() / 2] ^= 0x40;
  WriteFile(dir, "run/checkpoints/step-2/decoder.pt", bytes);
  CommandResult r = Launch({"train", "--resume", run, "--set", "train.steps=3"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("step-2' skipped: 'decoder.pt' does not match its sha256 (corrupt)"),
            std::string::npos)
      << r.output;
  EXPECT_NE(Slurp(run + "/decoder.log").find("checkpoints/step-1/decoder.pt at step 1"),
            std::string::npos)
      << "resumes from step-1\n"
      << r.output;
}

TEST(ErrorCatalogue, EveryCheckpointTornOrTruncated) {
  TempDir dir;
  const std::string run = TrainedRun(dir, 2);
  fs::resize_file(run + "/checkpoints/step-2/encoder.pt", 100);  // truncated
  fs::remove(run + "/checkpoints/step-1/manifest.json");         // torn: no manifest
  const std::string before = Fingerprint(run);
  CommandResult r = Launch({"train", "--resume", run});
  ExpectOneError(r, 2, "no complete checkpoint");
  EXPECT_NE(r.output.find("step-2' skipped: 'encoder.pt' has 100 bytes"), std::string::npos)
      << r.output;
  EXPECT_EQ(Fingerprint(run), before);
}

TEST(ErrorCatalogue, ForeignCheckpoint) {
  TempDir dir;
  const std::string run = TrainedRun(dir, 1);
  const std::string before = Fingerprint(run);
  ExpectOneError(Launch({"train", "--resume", run, "--set", "model.features=[4,8,16,32]"}), 2,
                 "was written for a different model");
  EXPECT_EQ(Fingerprint(run), before);
}

// A real stage process given a control frame whose header claims 1 TiB, then
// one with a bad magic: each is rejected before allocating, reported to the
// peer as one Failed line, and the stage exits 1.
TEST(ErrorCatalogue, OversizeOrMalformedControlMessageToAStage) {
  struct Frame {
    uint32_t magic, type;
    uint64_t length;
  };
  const std::pair<Frame, std::string> cases[] = {
      {{ipc::kControlMagic, 4, 1ULL << 40}, "payload length 1099511627776 exceeds the limit"},
      {{0x12345678, 4, 8}, "bad magic 0x12345678"}};
  for (const auto& [frame, says] : cases) {
    const ipc::RunId id = ipc::RunId::Random();
    const std::string prefix = "up-" + std::to_string(getpid()) + "-" + id.Hex();
    auto fwd = ipc::ShmRing::Create({prefix + "-0to1-fwd", id, 2, 1 << 20});
    auto bwd = ipc::ShmRing::Create({prefix + "-0to1-bwd", id, 2, 1 << 20});
    const std::string sockets = ipc::MakePrivateRunDir(prefix);
    ipc::ControlListener listener = ipc::ControlListener::Listen(sockets + "/control.sock");
    BackgroundCommand stage({BinPath("encoder_proc"), "--config", SourcePath("configs/tiny.yaml"),
                             "--control", listener.path(), "--run-id", id.Hex(), "--rings",
                             prefix});
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    ipc::ControlChannel control = listener.Accept(deadline);
    ipc::ExpectType(control.Receive(deadline), ipc::MsgType::kHello, "encoder");
    control.Send(ipc::EncodeWelcome());
    ASSERT_EQ(::send(control.fd(), &frame, sizeof(frame), MSG_NOSIGNAL),
              static_cast<ssize_t>(sizeof(frame)));
    const ipc::ControlMessage answer = control.Receive(deadline);
    ASSERT_EQ(answer.type, static_cast<uint32_t>(ipc::MsgType::kFailed));
    const ipc::Failure failure = ipc::DecodeFailed(answer);
    EXPECT_EQ(failure.exit_code, 1);
    EXPECT_NE(failure.message.find(says), std::string::npos) << failure.message;
    CommandResult r = stage.Wait(30);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    ipc::RemoveTree(sockets);
  }
}

// ENOSPC while checkpointing, for real: the run folder lies on a tmpfs just
// big enough for one checkpoint, mounted in a private mount namespace.
TEST(ErrorCatalogue, NoSpaceWhileCheckpointing) {
  TempDir dir;
  const std::string probe = TrainedRun(dir, 1);
  uint64_t checkpoint_bytes = 0;
  for (const auto& e : fs::directory_iterator(probe + "/checkpoints/step-1"))
    checkpoint_bytes += fs::file_size(e.path());
  fs::create_directories(dir / "mnt");
  const uint64_t tmpfs_bytes = checkpoint_bytes * 3 / 2 + (256 << 10);
  const std::string script =
      "set -u\n"
      "mount -t tmpfs -o size=" +
      std::to_string(tmpfs_bytes) + " tmpfs " + (dir / "mnt") + " || exit 99\n" +
      BinPath("unet-pipeline") + " train --config " + SourcePath("configs/tiny.yaml") + " --out " +
      (dir / "mnt/run") +
      " --set train.steps=3 --set checkpoint.every=1\n"
      "echo \"TRAIN_EXIT=$?\"\n"
      "cp -a " +
      (dir / "mnt/run") + " " + (dir / "run") + "\n";
  CommandResult r =
      RunCommand({"/usr/bin/unshare", "--mount", "--map-root-user", "/bin/bash", "-c", script});
  if (r.exit_code == 99 || r.output.find("TRAIN_EXIT=") == std::string::npos) {
    GTEST_SKIP() << "cannot mount a private tmpfs here (no user or mount namespaces): " << r.output;
  }
  EXPECT_NE(r.output.find("TRAIN_EXIT=1"), std::string::npos) << r.output;
  const std::string train_output = r.output.substr(0, r.output.find("TRAIN_EXIT="));
  ExpectOneError({1, train_output}, 1, "No space left on device");
  EXPECT_NE(train_output.find("checkpoint step-1 is intact: continue with --resume"),
            std::string::npos)
      << train_output;
  // Nothing half-written is visible; the older checkpoint verifies and resumes.
  for (const auto& e : fs::directory_iterator(dir / "run/checkpoints")) {
    EXPECT_EQ(e.path().filename().string().find("staging"), std::string::npos) << e.path();
  }
  EXPECT_TRUE(fs::exists(dir / "run/checkpoints/step-1/manifest.json"));
  EXPECT_FALSE(fs::exists(dir / "run/checkpoints/step-2"));
  CommandResult resumed = Launch({"train", "--resume", dir / "run", "--set", "train.steps=2"});
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
}

// ---- the document --------------------------------------------------------------------

// A run whose processes would hold more host memory than the machine has
// (tiny3d at 1024^3: terabytes by the estimate) is refused in one line,
// exit 2, before any process starts: no run folder, no shared memory.
TEST(ErrorCatalogue, RunThatCannotFitTheHostIsRefusedBeforeItStarts) {
  TempDir dir;
  for (bool single : {false, true}) {
    // Through a shell that prints its pid and then becomes the launcher, so the
    // segments this launcher would name (up-<pid>-...) are known exactly while
    // other tests make segments of their own beside it.
    std::vector<std::string> argv{"/bin/sh",
                                  "-c",
                                  "echo launcher-pid $$; exec \"$0\" \"$@\"",
                                  BinPath("unet-pipeline"),
                                  "train",
                                  "--config",
                                  SourcePath("configs/tiny3d.yaml"),
                                  "--out",
                                  dir / "run",
                                  "--set",
                                  "data.size=[1024,1024,1024]"};
    if (single) argv.push_back("--single-process");
    const CommandResult r = RunCommand(argv, 180);
    ExpectOneError(r, 2, "host memory: this run needs about");
    EXPECT_NE(r.output.find("(MemTotal)"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("plan --config C --host-mem"), std::string::npos) << r.output;
    EXPECT_FALSE(fs::exists(dir / "run")) << "a refused start makes no run folder";
    EXPECT_EQ(r.output.find("[encoder]"), std::string::npos) << "no stage started: " << r.output;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(r.output, m, std::regex("launcher-pid (\\d+)"))) << r.output;
    const std::string prefix = "up-" + m[1].str() + "-";
    for (const auto& e : fs::directory_iterator("/dev/shm"))
      EXPECT_NE(e.path().filename().string().rfind(prefix, 0), 0u)
          << e.path() << " left behind by a refused start";
  }
}

// Every row of docs/ERRORS.md names, in its last column, a test that exists
// in tests/ (`Suite.Name`), and there are rows for every case the issue lists.
TEST(ErrorCatalogue, EveryRowNamesATestThatExists) {
  const std::string doc = Slurp(SourcePath("docs/ERRORS.md"));
  ASSERT_FALSE(doc.empty());
  std::set<std::string> defined;
  const std::regex test_macro(R"(TEST(?:_F|_P)?\(\s*(\w+),\s*(\w+)\))");
  for (const auto& e : fs::recursive_directory_iterator(SourcePath("tests"))) {
    if (e.path().extension() != ".cpp") continue;
    const std::string source = Slurp(e.path().string());
    for (std::sregex_iterator it(source.begin(), source.end(), test_macro), end; it != end; ++it)
      defined.insert((*it)[1].str() + "." + (*it)[2].str());
  }
  std::istringstream lines(doc);
  int rows = 0;
  const std::regex row_test(R"(\|\s*`(\w+)\.(\w+)`\s*\|\s*$)");
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("| ", 0) != 0 || line.find("---") != std::string::npos) continue;
    if (line.find("| case") == 0) continue;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(line, m, row_test)) << "row without a test: " << line;
    EXPECT_TRUE(defined.count(m[1].str() + "." + m[2].str()))
        << "docs/ERRORS.md names `" << m[1] << "." << m[2] << "`, which no test defines";
    EXPECT_TRUE(line.find("| 1 |") != std::string::npos ||
                line.find("| 2 |") != std::string::npos || line.find("| 0 |") != std::string::npos)
        << "row without an exit code: " << line;
    ++rows;
  }
  EXPECT_GE(rows, 20);
}

}  // namespace
}  // namespace up::test
