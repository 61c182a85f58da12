// The checkpoint manifest's reader trusts nothing: every malformed field is a
// RuntimeError naming it, and file sizes are compared before any file is read.
#include "common/run/checkpoint_manifest.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/base/errors.h"
#include "common/base/sha256.h"
#include "tests/support/command.h"

namespace up {
namespace {

CheckpointManifest Sample() {
  CheckpointManifest m;
  m.step = 7;
  m.model_signature = std::string(64, 'a');
  m.config_sha256 = std::string(64, 'b');
  m.files = {{"encoder.pt", 12, std::string(64, 'c')}, {"decoder.pt", 34, std::string(64, 'd')}};
  return m;
}

std::string ManifestErrorOf(const std::string& text) {
  try {
    ParseManifest(text);
  } catch (const RuntimeError& e) {
    return e.what();
  }
  return "";
}

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  s.replace(s.find(from), from.size(), to);
  return s;
}

TEST(CheckpointManifest, RoundTrips) {
  const CheckpointManifest m = ParseManifest(ManifestJson(Sample()));
  EXPECT_EQ(m.step, 7);
  EXPECT_EQ(m.model_signature, std::string(64, 'a'));
  ASSERT_EQ(m.files.size(), 2u);
  EXPECT_EQ(m.files[1].name, "decoder.pt");
  EXPECT_EQ(m.files[1].bytes, 34u);
}

TEST(CheckpointManifest, EveryMalformedFieldIsNamed) {
  const std::string good = ManifestJson(Sample());
  EXPECT_NE(ManifestErrorOf("").find("not a JSON object"), std::string::npos);
  EXPECT_NE(ManifestErrorOf("{\"format\": [").find("not JSON"), std::string::npos);
  EXPECT_NE(ManifestErrorOf(Replace(good, "unet-pipeline-checkpoint", "other")).find("'format'"),
            std::string::npos);
  EXPECT_NE(ManifestErrorOf(Replace(good, "\"version\":1", "\"version\":9")).find("version is 9"),
            std::string::npos);
  EXPECT_NE(ManifestErrorOf(Replace(good, "\"step\":7", "\"step\":-2")).find("'step' is -2"),
            std::string::npos);
  EXPECT_NE(ManifestErrorOf(Replace(good, "\"step\":7", "\"step\":\"x\"")).find("'step'"),
            std::string::npos);
  EXPECT_NE(ManifestErrorOf(Replace(good, std::string(64, 'a'), "abc")).find("'model_signature'"),
            std::string::npos);
  EXPECT_NE(
      ManifestErrorOf(Replace(good, "encoder.pt", "../../etc/passwd")).find("plain file name"),
      std::string::npos);
  EXPECT_NE(ManifestErrorOf(Replace(good, "\"bytes\":12", "\"bytes\":-12")).find("'bytes'"),
            std::string::npos);
  EXPECT_NE(ManifestErrorOf(std::string(kMaxManifestBytes + 1, ' ')).find("at most"),
            std::string::npos);
}

TEST(CheckpointManifest, StepOfCheckpointDir) {
  EXPECT_EQ(StepOfCheckpointDir("step-12"), 12);
  EXPECT_EQ(StepOfCheckpointDir("step-"), -1);
  EXPECT_EQ(StepOfCheckpointDir(".step-3.staging"), -1);
  EXPECT_EQ(StepOfCheckpointDir("step-1x"), -1);
  EXPECT_EQ(StepOfCheckpointDir("step-99999999999999999999999"), -1);  // no overflow
}

TEST(CheckpointManifest, VerifyChecksSizeThenHash) {
  test::TempDir dir;
  std::ofstream(dir / "encoder.pt") << "hello";
  CheckpointManifest m;
  m.files = {{"encoder.pt", 5, Sha256Hex("hello")}};
  EXPECT_EQ(VerifyCheckpointFiles(dir.path(), m), "");
  m.files[0].bytes = 6;
  EXPECT_NE(VerifyCheckpointFiles(dir.path(), m).find("truncated"), std::string::npos);
  m.files[0].bytes = 5;
  m.files[0].sha256 = Sha256Hex("jello");
  EXPECT_NE(VerifyCheckpointFiles(dir.path(), m).find("corrupt"), std::string::npos);
  m.files[0].name = "decoder.pt";
  EXPECT_NE(VerifyCheckpointFiles(dir.path(), m).find("missing"), std::string::npos);
}

}  // namespace
}  // namespace up
