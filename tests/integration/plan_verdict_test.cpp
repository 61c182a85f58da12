// `plan --json` says what decides: every row's parts (tensor bytes, the
// allocator's reserve, the workspace allowance, the contexts) add up to its
// needed_bytes, fits is needed_bytes <= usable_bytes (the card less the
// headroom), and the recommended way needs no more than usable_bytes; a bad
// --headroom is one line and exit 2. From the estimate (--no-measure), so it
// takes a second.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/support/command.h"

namespace up::test {
namespace {

// The objects of the JSON's "rows" array, as text.
std::vector<std::string> Rows(const std::string& plan) {
  std::vector<std::string> rows;
  const size_t list = plan.find("\"rows\":[");
  if (list == std::string::npos) return rows;
  size_t at = list + 8;
  while (at < plan.size() && plan[at] == '{') {
    int depth = 0;
    size_t end = at;
    for (; end < plan.size(); ++end) {
      if (plan[end] == '{') ++depth;
      if (plan[end] == '}' && --depth == 0) break;
    }
    rows.push_back(plan.substr(at, end - at + 1));
    at = end + 1;
    if (at < plan.size() && plan[at] == ',') ++at;
  }
  return rows;
}

long long Number(const std::string& json, const std::string& key) {
  const std::string value = JsonField(json, key);
  EXPECT_FALSE(value.empty()) << key << " missing in " << json;
  return value.empty() ? -1 : std::stoll(value);
}

CommandResult PlanBrats16g(const std::vector<std::string>& more) {
  std::vector<std::string> args{BinPath("unet-pipeline"), "plan", "--config",
                                SourcePath("configs/brats16g.yaml"), "--no-measure"};
  args.insert(args.end(), more.begin(), more.end());
  return RunCommand(args);
}

void ExpectRowsAddUp(const std::string& plan, long long usable) {
  const long long host_mem = Number(plan, "host_mem_bytes");
  const std::vector<std::string> rows = Rows(plan);
  ASSERT_EQ(rows.size(), 16u) << "8 ways, each as written and lean: " << plan;
  const std::string pick = JsonField(plan, "recommended");
  const std::string way = JsonField(pick, "way");
  for (const std::string& row : rows) {
    const std::string name = JsonField(row, "name");
    const bool lean_name = name.size() > 5 && name.compare(name.size() - 5, 5, " lean") == 0;
    EXPECT_EQ(JsonField(row, "lean"), lean_name ? "true" : "false") << row;
    const long long needed = Number(row, "needed_bytes");
    EXPECT_EQ(Number(row, "tensor_bytes") + Number(row, "reserve_bytes") +
                  Number(row, "workspace_allowance_bytes") + Number(row, "context_bytes"),
              needed)
        << row;
    EXPECT_EQ(JsonField(row, "decided_by"), "estimate") << row;
    EXPECT_EQ(Number(row, "tensor_bytes"), Number(row, "peak_bytes") - Number(row, "context_bytes"))
        << "by the estimate, the tensor bytes are the estimate's: " << row;
    EXPECT_EQ(JsonField(row, "fits"), needed <= usable ? "true" : "false") << row;
    const long long host = Number(row, "host_bytes");
    EXPECT_GT(host, 0) << row;
    EXPECT_EQ(JsonField(row, "host_decided_by"), "estimate") << row;
    EXPECT_EQ(host, Number(row, "host_estimate_bytes")) << row;
    EXPECT_EQ(JsonField(row, "fits_host"), host <= host_mem ? "true" : "false") << row;
    if (name == way) {
      EXPECT_EQ(JsonField(row, "fits"), "true") << row;
      EXPECT_EQ(JsonField(row, "fits_host"), "true")
          << "no recommended way above the host: " << row;
      EXPECT_EQ(Number(pick, "host_bytes"), host) << pick;
      EXPECT_EQ(Number(pick, "needed_bytes"), needed) << pick;
    }
  }
  if (JsonField(pick, "fits") == "true") {
    EXPECT_LE(Number(pick, "needed_bytes"), usable) << pick;
  }
}

TEST(PlanVerdict, RowsAddUpAndTheRecommendedWayLeavesTheHeadroom) {
  for (const char* headroom : {"", "10%", "1.5GiB", "0"}) {
    std::vector<std::string> args{"--gpu-mem", "16GiB", "--json"};
    if (*headroom) args.insert(args.end(), {"--headroom", headroom});
    const CommandResult r = PlanBrats16g(args);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const long long card = Number(r.output, "budget_bytes");
    const long long usable = Number(r.output, "usable_bytes");
    EXPECT_EQ(card, 16LL << 30);
    EXPECT_EQ(usable, card - Number(r.output, "headroom_bytes")) << r.output;
    if (std::string(headroom).empty()) {
      EXPECT_EQ(JsonField(r.output, "headroom"), "10%");
    }
    ExpectRowsAddUp(r.output, usable);
  }
}

// The table shows what each way needs and says under it what that counts
// and which figure decided.
TEST(PlanVerdict, TheTableSaysWhatNeededCountsAndWhatDecided) {
  const CommandResult r = PlanBrats16g({"--gpu-mem", "16GiB", "--headroom", "2GiB"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* says :
       {"needed", "14.0 GiB usable", "allocator's reserve", "workspace", "Decided by the estimate"})
    EXPECT_NE(r.output.find(says), std::string::npos) << says << " in " << r.output;
}

// Every run trains with expandable segments unless the user set the
// allocator's configuration; plan says which is in effect (table and JSON).
TEST(PlanVerdict, SaysTheCudaAllocatorSettingTheRunsTrainWith) {
  const CommandResult ours =
      RunCommand({"/usr/bin/env", "-u", "PYTORCH_CUDA_ALLOC_CONF", "-u", "PYTORCH_ALLOC_CONF",
                  BinPath("unet-pipeline"), "plan", "--config", SourcePath("configs/brats16g.yaml"),
                  "--no-measure", "--json"});
  ASSERT_EQ(ours.exit_code, 0) << ours.output;
  EXPECT_EQ(JsonField(ours.output, "cuda_alloc_conf"),
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True");
  const CommandResult theirs =
      RunCommand({"/usr/bin/env", "PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.6",
                  BinPath("unet-pipeline"), "plan", "--config", SourcePath("configs/brats16g.yaml"),
                  "--no-measure"});
  ASSERT_EQ(theirs.exit_code, 0) << theirs.output;
  EXPECT_NE(
      theirs.output.find("train with PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.6"),
      std::string::npos)
      << theirs.output;
}

// --host-mem: the machine's MemTotal by default, or a size; the recommended
// way fits the host too, so a small host turns the pick to a way holding
// less host memory (or none).
TEST(PlanVerdict, HostMemDecidesWithTheCard) {
  long long previous_host = -1;
  for (const char* host_mem : {"", "64GiB", "12.7GiB", "9GiB", "2GiB"}) {
    std::vector<std::string> args{"--gpu-mem", "16GiB", "--json", "--set", "train.micro_batches=2"};
    if (*host_mem) args.insert(args.end(), {"--host-mem", host_mem});
    const CommandResult r = PlanBrats16g(args);
    ASSERT_EQ(r.exit_code, 0) << host_mem << ": " << r.output;
    const long long host = Number(r.output, "host_mem_bytes");
    EXPECT_GT(host, 0) << r.output;
    if (std::string(host_mem) == "12.7GiB") {
      EXPECT_NEAR(host, 12.7 * (1LL << 30), 1) << r.output;
    }
    ExpectRowsAddUp(r.output, Number(r.output, "usable_bytes"));
    const std::string pick = JsonField(r.output, "recommended");
    if (JsonField(pick, "fits") == "true" && JsonField(pick, "way") != "pipeline parts") {
      EXPECT_LE(Number(pick, "host_bytes"), host) << pick;
      if (previous_host >= 0 && *host_mem) {
        EXPECT_LE(Number(pick, "host_bytes"), previous_host) << pick;
      }
      previous_host = Number(pick, "host_bytes");
    }
    if (std::string(host_mem) == "2GiB") {
      EXPECT_EQ(JsonField(pick, "fits"), "false") << "nothing fits 2 GiB of host: " << pick;
    }
  }
  const CommandResult table = PlanBrats16g({"--host-mem", "9GiB"});
  ASSERT_EQ(table.exit_code, 0) << table.output;
  for (const char* says : {"host memory 9.0 GiB (--host-mem)", "host?",
                           "fits host: host <=", "An estimate from shapes (--no-measure)"})
    EXPECT_NE(table.output.find(says), std::string::npos) << says << " in " << table.output;
}

TEST(PlanVerdict, BadHostMemIsOneLineAndExit2) {
  for (const char* bad : {"lots", "-1GiB", "0", "12.7"}) {
    const CommandResult r = PlanBrats16g({"--host-mem", bad});
    if (std::string(bad) == "12.7") {  // a number of bytes: valid, tiny
      EXPECT_EQ(r.exit_code, 0) << r.output;
      continue;
    }
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.output;
    EXPECT_NE(r.output.find(std::string("--host-mem = ") + bad), std::string::npos) << r.output;
    std::string text = r.output;
    while (!text.empty() && text.back() == '\n') text.pop_back();
    EXPECT_EQ(text.find('\n'), std::string::npos) << "one line: " << r.output;
  }
}

TEST(PlanVerdict, BadHeadroomIsOneLineAndExit2) {
  for (const char* bad : {"lots", "100%", "150%", "16GiB"}) {
    const CommandResult r = PlanBrats16g({"--headroom", bad});
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.output;
    EXPECT_NE(r.output.find(std::string("--headroom = ") + bad), std::string::npos) << r.output;
    std::string text = r.output;
    while (!text.empty() && text.back() == '\n') text.pop_back();
    EXPECT_EQ(text.find('\n'), std::string::npos) << "one line: " << r.output;
  }
}

}  // namespace
}  // namespace up::test
