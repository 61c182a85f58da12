// Tests for up::ReadTorchscriptBundle (torch-free): a hand-made manifest over
// small stand-in files (their bytes and SHA-256 are what the reader checks;
// loading them as TorchScript is the stages' and the integration test's):
// the geometry it gives, the config it feeds, and one clear line for each
// way a bundle can be wrong.
#include "common/formats/torchscript_bundle.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "common/base/errors.h"
#include "common/base/sha256.h"
#include "common/config/config_file.h"
#include "common/layout/model_geometry.h"
#include "tests/support/command.h"

namespace up {
namespace {

// A 2-D U-Net with one level: encoder0 (2 -> 4 channels, 16x16), the
// bottleneck encoder1 (8 channels, 8x8), decoder0, head0 (3 classes).
struct FakeBundle {
  test::TempDir dir;
  std::string encoder0 = R"({"file": "encoder0.pt", "level": 0, "inputs": [[1, 2, 16, 16]],
                             "output": [1, 4, 16, 16]})";
  std::string encoder1 = R"({"file": "encoder1.pt", "level": 1, "inputs": [[1, 4, 16, 16]],
                             "output": [1, 8, 8, 8]})";
  std::string decoder0 = R"({"file": "decoder0.pt", "level": 0,
                             "inputs": [[1, 8, 8, 8], [1, 4, 16, 16]], "output": [1, 4, 16, 16]})";
  std::string head0 = R"({"file": "head0.pt", "level": 0, "inputs": [[1, 4, 16, 16]],
                          "output": [1, 3, 16, 16]})";
  std::string top = R"("format": "unet-pipeline-torchscript", "version": 1, "dims": 2,
                       "example": [1, 2, 16, 16])";

  // Writes each file (its name as content) and a manifest listing its real
  // size and hash, unless `lie` edits the entry text first.
  std::string Write(const std::function<void(std::string&)>& lie = nullptr) {
    auto entry = [&](std::string e) {
      const size_t at = e.find("\"file\": \"") + 9;
      const std::string file = e.substr(at, e.find('"', at) - at);
      std::ofstream(dir / file) << file;
      const std::string fields =
          "\"bytes\": " + std::to_string(file.size()) + ", \"sha256\": \"" + Sha256Hex(file) +
          "\", \"method\": \"script\", \"state\": [{\"name\": \"w\", \"shape\": [2], "
          "\"dtype\": \"float32\", \"kind\": \"parameter\", \"keys\": [\"" +
          file + ".w\"]}], ";
      return "{" + fields + e.substr(1);
    };
    std::string text = "{" + top + ", \"encoder\": [" + entry(encoder0) + ", " + entry(encoder1) +
                       "], \"decoder\": [" + entry(decoder0) + "], \"heads\": [" + entry(head0) +
                       "]}";
    if (lie) lie(text);
    std::ofstream(dir / "manifest.json") << text;
    return dir.path();
  }
};

std::string BundleErrorOf(const std::string& dir) {
  try {
    ReadTorchscriptBundle(dir);
  } catch (const UsageError& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    EXPECT_EQ(m.rfind("config: model.path = '", 0), 0u) << m;
    return m;
  }
  return "<no error>";
}

#define EXPECT_HAS(message, piece) \
  EXPECT_NE((message).find(piece), std::string::npos) << "message: " << (message)

TEST(TorchscriptBundle, GeometryAndConfigComeFromTheManifest) {
  FakeBundle b;
  const std::string dir = b.Write();
  const TorchscriptBundle bundle = ReadTorchscriptBundle(dir);
  EXPECT_EQ(bundle.levels(), 1);
  EXPECT_EQ(bundle.in_channels, 2);
  EXPECT_EQ(bundle.num_classes, 3);
  const Config c =
      LoadConfigFromString("{}", "t.yaml", {"model.kind=torchscript", "model.path=" + dir});
  EXPECT_EQ(c.model.dims, 2);
  EXPECT_EQ(c.data.size, (std::vector<int>{16, 16}));
  const LevelGeometry g = Geometry(c.model);
  EXPECT_EQ(g.skip_channels, (std::vector<int64_t>{4}));
  EXPECT_EQ(g.bottleneck_channels, 8);
  EXPECT_EQ(g.scale.back(), (std::vector<int>{2, 2}));
  // The dump loads back to itself (the stages' handshake compares it).
  const std::string dump = DumpConfig(c);
  EXPECT_EQ(DumpConfig(LoadConfigFromString(dump, "dump.yaml", {})), dump);
  // Any multiple of the downsampling is a patch; the bundle's classes are fixed.
  EXPECT_NO_THROW(LoadConfigFromString(
      "{}", "t.yaml", {"model.kind=torchscript", "model.path=" + dir, "data.size=6"}));
  EXPECT_THROW(LoadConfigFromString("{}", "t.yaml",
                                    {"model.kind=torchscript", "model.path=" + dir, "data.size=7"}),
               UsageError);
  EXPECT_THROW(
      LoadConfigFromString("{}", "t.yaml",
                           {"model.kind=torchscript", "model.path=" + dir, "model.num_classes=4"}),
      UsageError);
  EXPECT_THROW(
      LoadConfigFromString("{}", "t.yaml",
                           {"model.kind=torchscript", "model.path=" + dir, "model.features=[4]"}),
      UsageError);
}

TEST(TorchscriptBundle, EachWayOfBeingWrongIsOneLineNamingIt) {
  {
    FakeBundle b;
    EXPECT_HAS(BundleErrorOf(b.dir / "none"), "not a folder");
    EXPECT_HAS(BundleErrorOf(b.dir.path()), "no manifest.json in it");
  }
  {
    FakeBundle b;
    const std::string dir = b.Write([](std::string& t) { t.replace(t.find("1,"), 2, "7,"); });
    EXPECT_HAS(BundleErrorOf(dir), "has version 7; this build reads version 1");
  }
  {
    FakeBundle b;
    const std::string dir = b.Write();
    std::ofstream(dir + "/head0.pt") << "head0.px";  // same size, other bytes
    EXPECT_HAS(BundleErrorOf(dir), "head0.pt: its SHA-256 is not the manifest's");
    std::filesystem::remove(dir + "/head0.pt");
    EXPECT_HAS(BundleErrorOf(dir), "head0.pt: missing; the manifest lists it");
  }
  {
    FakeBundle b;
    b.decoder0 = R"({"file": "decoder0.pt", "level": 0,
                     "inputs": [[1, 8, 8, 8], [1, 4, 8, 8]], "output": [1, 4, 16, 16]})";
    EXPECT_HAS(BundleErrorOf(b.Write()),
               "decoder0.pt: input 1 is 1x4x8x8, but skip 0 (encoder0.pt's output) is 1x4x16x16");
  }
  {
    FakeBundle b;
    b.encoder1 = R"({"file": "encoder1.pt", "level": 1, "inputs": [[1, 4, 16, 16]],
                     "output": [1, 8, 5, 5]})";
    EXPECT_HAS(BundleErrorOf(b.Write()), "encoder1.pt: output 1x8x5x5 does not divide the example");
  }
  {
    FakeBundle b;
    b.head0 = R"({"file": "head0.pt", "level": 0, "inputs": [[1, 4, 16, 16]],
                  "output": [1, 1, 16, 16]})";
    EXPECT_HAS(BundleErrorOf(b.Write()), "segmentation needs at least 2 classes");
  }
  {
    FakeBundle b;
    b.head0 = R"({"file": "sub/head0.pt", "level": 0, "inputs": [[1, 4, 16, 16]],
                  "output": [1, 3, 16, 16]})";
    const std::string dir = b.Write();
    EXPECT_HAS(BundleErrorOf(dir), "is not a file name inside the bundle");
  }
}

}  // namespace
}  // namespace up
