// plan's verdict (card_budget.h, memory_plan.h's DecideFit and Recommend):
// --headroom parses or fails with one line naming it; a way needs its tensor
// bytes with the allocator's reserve, a workspace and a context per process,
// and fits only under the card less the headroom; every row's parts add up
// to its verdict; no recommended way needs more than the card less the
// headroom, estimated or measured.
#include "launcher/tools/card_budget.h"
#include "common/base/errors.h"
#include "common/config/config_file.h"
#include "launcher/tools/host_budget.h"

#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "common/base/errors.h"
#include "common/config/config_file.h"
#include "launcher/tools/memory_plan.h"

namespace up {
namespace {

constexpr int64_t kGiB = 1LL << 30;

Config Brats16g(const std::vector<std::string>& sets = {}) {
  return LoadConfig(std::string(UP_SOURCE_DIR) + "/configs/brats16g.yaml", sets);
}

TEST(PlanHeadroom, IsAPercentOfTheCardOrASize) {
  CardBudget card = ParseCardBudget("16GiB", "10%");
  EXPECT_EQ(card.card_bytes, 16 * kGiB);
  EXPECT_EQ(card.headroom_bytes, std::llround(16 * kGiB * 0.10));
  EXPECT_EQ(card.usable_bytes(), card.card_bytes - card.headroom_bytes);
  EXPECT_EQ(card.headroom_text, "10%");
  EXPECT_EQ(ParseCardBudget("16GiB", " 7.5% ").headroom_bytes, std::llround(16 * kGiB * 0.075));
  EXPECT_EQ(ParseCardBudget("16GiB", "1.5GiB").headroom_bytes, 3 * kGiB / 2);
  EXPECT_EQ(ParseCardBudget("16GiB", "512 MiB").headroom_bytes, 512LL << 20);
  EXPECT_EQ(ParseCardBudget("16GiB", "0").usable_bytes(), 16 * kGiB);
  EXPECT_EQ(ParseCardBudget("16GiB", "0%").usable_bytes(), 16 * kGiB);
  EXPECT_EQ(ParseCardBudget("16GiB", kDefaultHeadroom).headroom_text, "10%");
}

// One line naming the flag and the value, exit 2 (a UsageError).
TEST(PlanHeadroom, BadValuesAreOneLineNamingTheFlag) {
  for (const char* bad : {"lots", "", "%", "-5%", "100%", "150%", "10%%", "ten%", "nan%", "-1GiB",
                          "16 furlongs", "16GiB", "20GiB"}) {
    try {
      ParseCardBudget("16GiB", bad);
      ADD_FAILURE() << "--headroom " << bad << " was accepted";
    } catch (const UsageError& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind("--headroom = " + std::string(bad), 0), 0u) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
      EXPECT_EQ(e.exit_code(), 2);
    }
  }
  // What is wrong with a headroom as large as the card, said so.
  try {
    ParseCardBudget("16GiB", "20GiB");
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("leaves nothing of --gpu-mem 16GiB"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(ParseCardBudget("lots", "10%"), UsageError);
}

TEST(PlanHeadroom, ANeedIsItsParts) {
  const CardNeed one = NeedOnCard(1000, 1);
  EXPECT_EQ(one.tensor_bytes, 1000);
  EXPECT_EQ(one.reserve_bytes, 150);  // kAllocatorReserveFraction, rounded up
  EXPECT_EQ(one.workspace_bytes, kWorkspaceAllowanceBytes);
  EXPECT_EQ(one.context_bytes, kContextAllowanceBytes);
  EXPECT_EQ(one.total(), 1000 + 150 + kWorkspaceAllowanceBytes + kContextAllowanceBytes);
  const CardNeed two = NeedOnCard(10 * kGiB, 2);
  EXPECT_EQ(two.workspace_bytes, 2 * kWorkspaceAllowanceBytes);
  EXPECT_EQ(two.context_bytes, 2 * kContextAllowanceBytes);
  EXPECT_GE(two.reserve_bytes, static_cast<int64_t>(10 * kGiB * kAllocatorReserveFraction));
  EXPECT_EQ(AllocatorReserveBytes(0), 0);
  EXPECT_NE(NeedText(two).find("2.0 GiB contexts of 2 processes"), std::string::npos)
      << NeedText(two);
}

// A card just above a way's tensor bytes and contexts (what fits used to
// count) but below them with the allowances: the way does not fit.
TEST(PlanHeadroom, TensorsAndContextsAloneDoNotFit) {
  for (PlanRow row : PlanMemory(Brats16g(), 16 * kGiB)) {
    for (int64_t measured : {int64_t{-1}, row.tensor_estimate() / 2}) {
      row.tensor_bytes = measured;
      const int64_t old_rule = row.tensor_estimate() + row.context_bytes;
      DecideFit(old_rule + 1, &row);
      EXPECT_FALSE(row.fits) << row.name << ": needs " << NeedText(row.need);
      DecideFit(row.need.total() - 1, &row);
      EXPECT_FALSE(row.fits) << row.name;
      DecideFit(row.need.total(), &row);
      EXPECT_TRUE(row.fits) << row.name;
    }
  }
}

// Every row's parts add up to what it needs, the tensor bytes are the
// measured ones where measured (else the estimate less its contexts), and
// fits is needed <= usable.
TEST(PlanHeadroom, EveryRowAddsUpToItsVerdict) {
  for (const char* policy : {"keep", "recompute"}) {
    const Config c = Brats16g({std::string("pipeline.activations=") + policy});
    for (int64_t usable : {4 * kGiB, 12 * kGiB, 14 * kGiB, 40 * kGiB}) {
      for (PlanRow row : PlanMemory(c, usable)) {
        for (bool measured : {false, true}) {
          if (measured) {
            row.tensor_bytes = row.peak_bytes / 3;
            DecideFit(usable, &row);
          }
          const CardNeed& n = row.need;
          EXPECT_EQ(n.tensor_bytes,
                    measured ? row.tensor_bytes : row.peak_bytes - row.context_bytes);
          EXPECT_EQ(n.context_bytes, row.context_bytes) << row.name;
          EXPECT_EQ(n.total(),
                    n.tensor_bytes + n.reserve_bytes + n.workspace_bytes + n.context_bytes);
          EXPECT_EQ(n.reserve_bytes, AllocatorReserveBytes(n.tensor_bytes));
          EXPECT_EQ(n.workspace_bytes, row.processes * kWorkspaceAllowanceBytes);
          EXPECT_EQ(row.fits, n.total() <= usable) << row.name << " at " << usable;
        }
      }
    }
  }
}

// Across cards and headrooms, by the estimate and by (made-up) measurements:
// what plan recommends needs no more than the card less the headroom, and
// every way with less work does not fit.
TEST(PlanHeadroom, NoRecommendedWayNeedsMoreThanTheCardLessTheHeadroom) {
  const Config c = Brats16g({"train.micro_batches=2"});
  int recommended = 0;
  for (const char* card_text : {"4GiB", "8GiB", "12GiB", "16GiB", "24GiB", "80GiB"}) {
    for (const char* headroom : {"0", "10%", "25%", "2GiB"}) {
      const CardBudget card = ParseCardBudget(card_text, headroom);
      for (bool measured : {false, true}) {
        std::vector<PlanRow> rows = PlanMemory(c, card.usable_bytes());
        if (measured) {
          for (PlanRow& r : rows) {
            r.tensor_bytes = r.tensor_estimate() * 2 / 3;
            DecideFit(card.usable_bytes(), &r);
          }
        }
        const auto fewest = FewestPartsThatFit(c, card.usable_bytes(), true);
        const Recommendation pick = Recommend(c, rows, fewest, FloorBytes(c), card);
        const std::string where = std::string(card_text) + " less " + headroom;
        if (!pick.fits) continue;
        ++recommended;
        EXPECT_LE(pick.bytes, card.usable_bytes()) << where << ": " << pick.way;
        EXPECT_NE(pick.reason.find(FormatBytes(card.usable_bytes())), std::string::npos)
            << pick.reason;
        for (const PlanRow& r : rows) {
          if (r.name != pick.way) continue;
          EXPECT_TRUE(r.fits);
          EXPECT_EQ(pick.bytes, r.need.total()) << where;
        }
        if (pick.way == "pipeline parts") {
          for (const PlanRow& r : rows) EXPECT_FALSE(r.fits) << where << ": " << r.name;
          EXPECT_EQ(pick.bytes, fewest->shared_need.total());
        }
      }
    }
  }
  EXPECT_GT(recommended, 10);
}

// The case the headroom is for: a way whose tensors and context come to
// 99% of the card is not recommended; with no headroom and room for the
// allowances it is.
TEST(PlanHeadroom, AWayAt99PercentOfTheCardIsNotRecommended) {
  const Config c = Brats16g({"train.micro_batches=2"});
  const CardBudget card = ParseCardBudget("16GiB", "10%");
  std::vector<PlanRow> rows = PlanMemory(c, card.usable_bytes());
  for (PlanRow& r : rows) {
    r.tensor_bytes = r.name == "single-process" ? 99 * card.card_bytes / 100 - r.context_bytes
                                                : 2 * card.card_bytes;
    DecideFit(card.usable_bytes(), &r);
  }
  const Recommendation pick = Recommend(c, rows, std::nullopt, FloorBytes(c), card);
  EXPECT_NE(pick.way, "single-process") << pick.reason;
  EXPECT_FALSE(pick.fits) << pick.reason;
  const CardBudget roomy = ParseCardBudget("20GiB", "0");
  for (PlanRow& r : rows) DecideFit(roomy.usable_bytes(), &r);
  EXPECT_EQ(Recommend(c, rows, std::nullopt, FloorBytes(c), roomy).way, "single-process");
}

}  // namespace
}  // namespace up

namespace up {
namespace {

// The host's estimate: its parts add up, the ring and the parked state show
// where the way has them, and the preflight refuses above MemTotal (one
// UsageError) and warns above MemAvailable only.
TEST(HostBudget, PartsAddUpAndThePreflightRefusesAboveMemTotal) {
  Config c = LoadConfig("", {"model.dims=3", "data.size=[32,32,32]", "train.batch_size=2",
                             "train.micro_batches=2", "model.features=[8,16,32]"});
  const HostNeed pipe = EstimateHostNeed(c, false, true);
  EXPECT_EQ(pipe.processes, 3);  // two stages and the launcher
  EXPECT_EQ(pipe.runtime_bytes, 3 * kHostRuntimeAllowanceBytes);
  EXPECT_GT(pipe.ring_bytes, 0);
  EXPECT_GT(pipe.device_bytes, 0);
  EXPECT_EQ(pipe.total(), pipe.runtime_bytes + pipe.state_bytes + pipe.device_bytes +
                              pipe.offload_bytes + pipe.ring_bytes);
  const HostNeed on_gpu = EstimateHostNeed(c, true, false);
  EXPECT_EQ(on_gpu.processes, 1);
  EXPECT_EQ(on_gpu.device_bytes, 0);
  EXPECT_EQ(on_gpu.ring_bytes, 0);
  EXPECT_EQ(on_gpu.total(), kHostRuntimeAllowanceBytes);
  MachineMemory machine{pipe.total() - 1, pipe.total() - 1};
  EXPECT_THROW(CheckHostFits(pipe, machine), UsageError);
  machine = {pipe.total(), pipe.total() - 1};
  EXPECT_NE(CheckHostFits(pipe, machine).find("MemAvailable"), std::string::npos);
  machine = {pipe.total(), pipe.total()};
  EXPECT_EQ(CheckHostFits(pipe, machine), "");
  EXPECT_GT(ReadMachineMemory().total_bytes, 0);
  EXPECT_THROW(ParseHostMem("lots"), UsageError);
  EXPECT_EQ(ParseHostMem("12GiB"), 12LL << 30);
}

}  // namespace
}  // namespace up
