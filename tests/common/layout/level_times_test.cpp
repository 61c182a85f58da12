// pipeline.balance: time's arithmetic (common/layout/level_times.h): which halves
// it cuts, where, the mirrored placement's per-device sums, and the file the
// stage binaries write.
#include "common/layout/level_times.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "common/base/errors.h"
#include "common/base/fs_util.h"
#include "common/config/config_file.h"

namespace up {
namespace {

// The classic tiny U-Net: 4 levels (L = 4), 5 encoder levels.
Config Tiny(const std::vector<std::string>& sets) {
  std::vector<std::string> all{"model.features=[4, 8, 16, 32]", "data.size=32"};
  all.insert(all.end(), sets.begin(), sets.end());
  return LoadConfigFromString("{}", "test", all);
}

LevelTimes Times() {
  LevelTimes t;
  t.encoder_ms = {8.0, 1.0, 1.0, 1.0, 1.0};  // the full-resolution level dominates
  t.decoder_ms = {9.0, 1.0, 1.0, 3.0};       // level 0 (with the loss) .. level 3
  return t;
}

TEST(LevelTimes, OnlyTimeWithAnOpenCutAsksForTimes) {
  EXPECT_FALSE(NeedsLevelTimes(Tiny({"pipeline.encoder_parts=2"})));  // balance: memory
  EXPECT_FALSE(NeedsLevelTimes(Tiny({"pipeline.balance=time"})));     // two stages: no cut
  EXPECT_TRUE(NeedsLevelTimes(Tiny({"pipeline.balance=time", "pipeline.decoder_parts=2"})));
  EXPECT_FALSE(NeedsLevelTimes(Tiny({"pipeline.balance=time", "pipeline.cuts.encoder=[2]"})));
}

TEST(LevelTimes, CutsEvenTheSlowestPartNotTheMemory) {
  Config c =
      Tiny({"pipeline.balance=time", "pipeline.encoder_parts=2", "pipeline.decoder_parts=2"});
  ASSERT_TRUE(ApplyTimeBalance(Times(), &c));
  // Encoder: level 0 alone (8) against levels 1-4 (4).
  EXPECT_EQ(c.pipeline.encoder_cuts, std::vector<int>{1});
  // Decoder in run order 3, 2, 1, 0 = (3, 1, 1, 9): level 0 alone.
  EXPECT_EQ(c.pipeline.decoder_cuts, std::vector<int>{3});
  const std::vector<double> parts = PartTimes(Times(), ResolveLayout(c));
  EXPECT_EQ(parts, (std::vector<double>{8.0, 4.0, 5.0, 9.0}));
}

TEST(LevelTimes, GivenCutsStay) {
  Config c =
      Tiny({"pipeline.balance=time", "pipeline.cuts.encoder=[3]", "pipeline.decoder_parts=2"});
  ASSERT_TRUE(ApplyTimeBalance(Times(), &c));
  EXPECT_EQ(c.pipeline.encoder_cuts, std::vector<int>{3});
  EXPECT_EQ(c.pipeline.decoder_cuts, std::vector<int>{3});
}

// Mirrored: device k runs encoder part k and the decoder part beside it, so
// the cut evens encoder level i plus decoder level i (the bottleneck with
// level L-1): (8+9, 1+1, 1+1, 1+3+1) = (17, 2, 2, 5).
TEST(LevelTimes, MirroredEvensEachDevicesEncoderAndDecoderWork) {
  Config c = Tiny({"pipeline.balance=time", "pipeline.placement=mirrored",
                   "pipeline.encoder_parts=2", "pipeline.decoder_parts=2"});
  ASSERT_TRUE(ApplyTimeBalance(Times(), &c));
  EXPECT_EQ(c.pipeline.encoder_cuts, std::vector<int>{1});
  EXPECT_TRUE(c.pipeline.decoder_cuts.empty());  // they mirror the encoder's
  const PipelineLayout layout = ResolveLayout(c);
  ASSERT_EQ(layout.size(), 4);
  EXPECT_EQ(layout.stages[3].lo, 0);  // the last decoder part runs level 0 only
  EXPECT_EQ(layout.stages[3].hi, 0);
}

TEST(LevelTimes, WrongCountsAreRefused) {
  Config c = Tiny({"pipeline.balance=time", "pipeline.encoder_parts=2"});
  LevelTimes t = Times();
  t.encoder_ms.pop_back();
  EXPECT_THROW(ApplyTimeBalance(t, &c), RuntimeError);
}

TEST(LevelTimes, TheFileRoundTripsAndABadOneNamesItsPath) {
  const std::string dir = std::filesystem::temp_directory_path() / "level_times_test";
  std::filesystem::create_directories(dir);
  const std::string enc = dir + "/encoder.json", dec = dir + "/decoder.json";
  WriteFileAtomic(enc, LevelTimesJson("encoder", {1.5, 0.25}, "cuda:1"));
  WriteFileAtomic(dec, LevelTimesJson("decoder", {3.0}, "cpu"));
  LevelTimes t;
  ReadLevelTimes(enc, &t);
  ReadLevelTimes(dec, &t);
  EXPECT_EQ(t.encoder_ms, (std::vector<double>{1.5, 0.25}));
  EXPECT_EQ(t.encoder_device, "cuda:1");
  EXPECT_EQ(t.decoder_ms, std::vector<double>{3.0});
  EXPECT_EQ(t.decoder_device, "cpu");
  WriteFileAtomic(enc, "{\"half\": \"middle\", \"device\": \"cpu\", \"ms\": [1]}");
  try {
    ReadLevelTimes(enc, &t);
    ADD_FAILURE() << "accepted";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find(enc), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace up
