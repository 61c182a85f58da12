// The bench commands as a user runs them, shrunk to seconds: each prints one
// well-formed JSON object with the required fields, and bad arguments exit 2
// with one line. No figure is asserted (timings depend on the machine).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "tests/support/command.h"

namespace up::test {
namespace {

CommandResult Bench(std::vector<std::string> args) {
  args.insert(args.begin(), {BinPath("unet-pipeline"), "bench"});
  return RunCommand(args, 600);
}

// The stdout line that holds the JSON object (progress goes to stderr).
std::string JsonLine(const std::string& output) {
  const size_t start = output.find("{\"bench\"");
  if (start == std::string::npos) return "";
  return output.substr(start, output.find('\n', start) - start);
}

// True if braces and brackets balance outside strings and nothing follows.
bool Balanced(const std::string& json) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (in_string) {
      if (c == '\\') ++i;
      if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    if (c == '{' || c == '[') ++depth;
    if (c == '}' || c == ']') --depth;
    if (depth < 0) return false;
  }
  return depth == 0 && !in_string && !json.empty() && json.back() == '}';
}

void ExpectFields(const std::string& json, const std::vector<std::string>& keys) {
  for (const std::string& k : keys)
    EXPECT_NE(json.find("\"" + k + "\":"), std::string::npos) << k << " missing in " << json;
}

void ExpectOneLineExit2(const std::vector<std::string>& args) {
  const CommandResult r = Bench(args);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  EXPECT_NE(r.output.find("error:"), std::string::npos) << r.output;
}

TEST(BenchTransport, JsonHasEveryFieldPerSize) {
  const CommandResult r =
      Bench({"transport", "--json", "--max-bytes", "65536", "--repeats", "1", "--seconds", "0.02"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string json = JsonLine(r.output);
  ASSERT_TRUE(Balanced(json)) << r.output;
  ExpectFields(json, {"machine", "cpu_model", "avx512", "cores", "memory_bytes", "results",
                      "transport", "bytes", "gbps", "memcpy_gbps", "ratio", "latency_us"});
  EXPECT_NE(JsonField(json, "results").find("\"transport\":\"shm\""), std::string::npos);
  for (const char* bytes : {"4096", "16384", "65536"})
    EXPECT_NE(json.find(std::string("\"bytes\":") + bytes + ","), std::string::npos) << bytes;
  EXPECT_EQ(json.find("\"bytes\":262144"), std::string::npos) << "above --max-bytes";
  EXPECT_EQ(json.find("null"), std::string::npos) << "a figure is not finite: " << json;
}

// Tensor bytes follow the CPU's oneDNN kernels (AVX-512 or not, and any limit
// set on them), so every bench's machine says which it had.
TEST(BenchTransport, MachineSaysWhichConvolutionKernelsItHad) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::stringstream text;
  text << cpuinfo.rdbuf();
  const bool avx512 = text.str().find(" avx512f") != std::string::npos;
  ::setenv("ONEDNN_MAX_CPU_ISA", "AVX2", 1);
  const CommandResult r =
      Bench({"transport", "--json", "--max-bytes", "4096", "--repeats", "1", "--seconds", "0.01"});
  ::unsetenv("ONEDNN_MAX_CPU_ISA");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string json = JsonLine(r.output);
  EXPECT_NE(json.find(std::string("\"avx512\":") + (avx512 ? "true" : "false")), std::string::npos)
      << json;
  EXPECT_NE(json.find("\"onednn_max_cpu_isa\":\"AVX2\""), std::string::npos) << json;
}

TEST(BenchTransport, TableByDefault) {
  const CommandResult r =
      Bench({"transport", "--max-bytes", "4096", "--repeats", "1", "--seconds", "0.01"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("memcpy GB/s"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("4 KiB"), std::string::npos) << r.output;
}

TEST(BenchStep, JsonHasEveryRow) {
  // The offload rows under a 14 MiB budget: each at the fewest micro-batches
  // that train under it.
  const CommandResult r =
      Bench({"step", "--config", SourcePath("configs/tiny.yaml"), "--json", "--steps", "2",
             "--rounds", "1", "--warmup", "1", "--budget", "14MiB"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string json = JsonLine(r.output);
  ASSERT_TRUE(Balanced(json)) << r.output;
  ExpectFields(json, {"machine", "results", "median_step_s", "ratio", "run_medians_s"});
  for (const char* label : {"single",
                            "pipeline",
                            "pipeline recompute",
                            "sequential",
                            "gpipe",
                            "1f1b",
                            "1f1b gloo",
                            "single fp16",
                            "pipeline fp16",
                            "python eager",
                            "single glibc defaults",
                            "pipeline glibc defaults",
                            "single checkpointing",
                            "single offload",
                            "pipeline offload",
                            "single as written",
                            "single lean",
                            "single offload as written",
                            "single offload lean",
                            "pipeline offload as written",
                            "pipeline offload lean"}) {
    EXPECT_NE(json.find(std::string("\"label\":\"") + label + "\""), std::string::npos) << label;
  }
  // Every row is measured, recompute too, and the Python eager peer (.venv's
  // torch training scripts/unet_reference.py's U-Net) beside the trainers;
  // on a CPU the two fp16 rows say why they are not (an emulation).
  size_t unbuilt = 0;
  for (size_t at = json.find("\"built\":false"); at != std::string::npos;
       at = json.find("\"built\":false", at + 1))
    ++unbuilt;
  EXPECT_EQ(unbuilt, 2u) << json;
  EXPECT_NE(json.find("fp16 on a CPU is emulated"), std::string::npos) << json;
  EXPECT_NE(json.find("\"mode\":\"python\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"ratio_to\":\"single\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"ratio_to\":\"pipeline offload as written\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"ratio_to\":\"pipeline\""), std::string::npos) << json;  // glibc row
  EXPECT_NE(json.find("\"peak_rss_bytes\":"), std::string::npos) << json;
  EXPECT_EQ(JsonField(json, "budget_bytes"), std::to_string(14 << 20)) << json;
  // The pipeline's offload way holds less than one process checkpointing, so
  // in the same budget it runs fewer, bigger micro-batches.
  auto micro_batches = [&](const std::string& label) {
    const size_t at = json.find("\"label\":\"" + label + "\"");
    if (at == std::string::npos) return 0;
    const std::string v = JsonField(json.substr(at, json.find('}', at) - at), "micro_batches");
    return v.empty() ? 0 : std::stoi(v);
  };
  const int ckpt = micro_batches("single checkpointing");
  const int pipe = micro_batches("pipeline offload");
  EXPECT_GE(micro_batches("single offload"), 1) << json;
  EXPECT_GE(pipe, 1) << json;
  EXPECT_LT(pipe, ckpt) << json;
  // The traced run's breakdown: the stages' work lies inside the turns the
  // launcher granted, and the turns inside the steps.
  const std::string b = JsonField(json, "pipeline_breakdown");
  ASSERT_FALSE(b.empty()) << json;
  EXPECT_EQ(JsonField(b, "steps"), "1") << b;
  const double step = std::stod(JsonField(b, "step_ms")), turn = std::stod(JsonField(b, "turn_ms"));
  const double compute = std::stod(JsonField(b, "compute_ms"));
  const double transfer = std::stod(JsonField(b, "transfer_ms"));
  EXPECT_GT(compute, 0) << b;
  EXPECT_GT(transfer, 0) << b;
  EXPECT_LE(compute + transfer, turn) << b;
  EXPECT_LE(turn, step) << b;
}

// Two and four stages under each schedule: a row each with its bubble (a
// share, next to the theory for equal stages), each stage's compute, and the
// first stage's peak; 1f1b never keeps more micro-batches in flight than gpipe.
TEST(BenchStages, EveryStageCountAndSchedule) {
  const CommandResult r =
      Bench({"stages", "--config", SourcePath("configs/tiny.yaml"), "--json", "--stages", "2,4",
             "--steps", "3", "--warmup", "1", "--set", "train.micro_batches=4"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string json = JsonLine(r.output);
  ASSERT_TRUE(Balanced(json)) << r.output;
  ExpectFields(json, {"machine", "rows", "bubble", "bubble_theory", "stage_compute_ms",
                      "first_peak_tensor_bytes", "speedup_vs_sequential", "slowest_limit_ms"});
  EXPECT_GT(std::stod(JsonField(json, "slowest_limit_ms")), 0.0) << json;
  size_t rows = 0;
  for (size_t at = json.find("\"schedule\":"); at != std::string::npos;
       at = json.find("\"schedule\":", at + 1))
    ++rows;
  EXPECT_EQ(rows, 6u) << json;
  for (const char* stage : {"\"encoder1\":", "\"encoder2\":", "\"decoder1\":", "\"decoder2\":"})
    EXPECT_NE(json.find(stage), std::string::npos) << stage << json;
  // gpipe with 4 stages and 4 micro-batches: theory (S-1)/(M+S-1) = 3/7.
  EXPECT_NE(json.find("\"bubble_theory\":0.42857142857142855"), std::string::npos) << json;
  const CommandResult bad =
      Bench({"stages", "--config", SourcePath("configs/tiny.yaml"), "--stages", "5"});
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--stages 5"), std::string::npos) << bad.output;

  // --layouts: the parts of each half, here the decoder cut by time.
  const CommandResult cut =
      Bench({"stages", "--config", SourcePath("configs/tiny.yaml"), "--json", "--layouts", "1+2",
             "--steps", "2", "--warmup", "1", "--set", "pipeline.balance=time"});
  ASSERT_EQ(cut.exit_code, 0) << cut.output;
  const std::string cut_json = JsonLine(cut.output);
  EXPECT_EQ(JsonField(cut_json, "encoder_parts"), "1") << cut_json;
  EXPECT_EQ(JsonField(cut_json, "decoder_parts"), "2") << cut_json;
  EXPECT_NE(cut_json.find("\"decoder2\":"), std::string::npos) << cut_json;
  const CommandResult bad_layout =
      Bench({"stages", "--config", SourcePath("configs/tiny.yaml"), "--layouts", "1-2"});
  EXPECT_EQ(bad_layout.exit_code, 2) << bad_layout.output;
  EXPECT_NE(bad_layout.output.find("\"1-2\" is not ENCODER_PARTS+DECODER_PARTS"), std::string::npos)
      << bad_layout.output;
}

// One and two replicas of the same global batch: each row's step time, and
// with two, each stage's exchange (a real time, its gradient bytes from the
// model) beside the Python peer's Gloo all-reduce of the same bytes.
TEST(BenchReplicas, EachCountWithItsExchangeAndPeer) {
  const CommandResult r = Bench({"replicas", "--config", SourcePath("configs/tiny.yaml"), "--json",
                                 "--replicas", "1,2", "--steps", "3", "--warmup", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string json = JsonLine(r.output);
  ASSERT_TRUE(Balanced(json)) << r.output;
  ExpectFields(json, {"machine", "rows", "step_ms", "samples_per_s", "exchange_ms", "bytes",
                      "peer_allreduce_ms", "single_process_step_ms"});
  EXPECT_GT(std::stod(JsonField(json, "single_process_step_ms")), 0.0) << json;
  EXPECT_EQ(JsonField(json, "peer_note"), "") << json;
  // tiny's encoder: 8-16-32-64 channels, 4 input channels, a bottleneck of
  // 128: its float32 gradients are well over 1 MiB and the same in each row.
  const size_t two = json.find("\"replicas\":2");
  ASSERT_NE(two, std::string::npos) << json;
  const std::string first = json.substr(0, two), second = json.substr(two);
  EXPECT_EQ(JsonField(first, "bytes"), JsonField(second, "bytes")) << json;
  EXPECT_GT(std::stoll(JsonField(second, "bytes")), 1 << 20) << json;
  EXPECT_EQ(std::stod(JsonField(first, "exchange_ms")), 0.0) << json;
  EXPECT_GT(std::stod(JsonField(second, "exchange_ms")), 0.0) << json;
  EXPECT_GT(std::stod(JsonField(second, "peer_allreduce_ms")), 0.0) << json;
  const CommandResult bad =
      Bench({"replicas", "--config", SourcePath("configs/tiny.yaml"), "--replicas", "3"});
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("pipeline.replicas x train.micro_batches (3 x 2 = 6)"),
            std::string::npos)
      << bad.output;
}

TEST(BenchMemory, JsonHasEveryProcess) {
  const CommandResult r =
      Bench({"memory", "--config", SourcePath("configs/tiny.yaml"), "--json", "--steps", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string json = JsonLine(r.output);
  ASSERT_TRUE(Balanced(json)) << r.output;
  ExpectFields(json, {"machine", "peak_rss_bytes", "trainer", "encoder", "decoder", "launcher",
                      "ratio", "larger_stage", "device_memory"});
  const std::string rss = JsonField(json, "peak_rss_bytes");
  EXPECT_GT(std::stoll(JsonField(rss, "trainer")), 0) << rss;
  EXPECT_GT(std::stoll(JsonField(rss, "decoder")), 0) << rss;
  // Measured tensor bytes: each stage holds less than the whole model's trainer.
  const std::string tensors = JsonField(json, "peak_tensor_bytes");
  const long long trainer = std::stoll(JsonField(tensors, "trainer"));
  EXPECT_GT(trainer, 0) << tensors;
  EXPECT_LT(std::stoll(JsonField(tensors, "encoder")), trainer) << tensors;
  EXPECT_LT(std::stoll(JsonField(tensors, "decoder")), trainer) << tensors;
  const double ratio = std::stod(JsonField(json, "tensor_ratio"));
  EXPECT_GT(ratio, 0);
  EXPECT_LT(ratio, 1);
}

// Capacity is measured by training under the budget: every largest size
// that trained stayed within it, and the pipeline recomputing with parked
// stages fits more than plain single-process (the stages split the state).
TEST(BenchCapacity, EveryWayFindsItsLargestWithinTheBudget) {
  // The ways compared below (--way: 14 of the 20 a config with 2 micro-batches has).
  const std::vector<std::string> ways{"single-process",
                                      "single-process, micro-batches of 1",
                                      "single-process, checkpointing",
                                      "single-process, offload",
                                      "single-process, checkpointing blocks, mb of 1",
                                      "single-process, offload, mb of 1",
                                      "pipeline recompute+park",
                                      "pipeline recompute+park, mb of 1",
                                      "pipeline offload+park",
                                      "pipeline recompute blocks+park, mb of 1",
                                      "pipeline offload+park, mb of 1",
                                      "4 stages recompute+park",
                                      "4 stages recompute+park, mb of 1",
                                      "pipeline offload+park, mb of 1, lean"};
  std::vector<std::string> args{"capacity", "--config", SourcePath("configs/tiny.yaml"),
                                "--budget", "16MiB",    "--steps",
                                "1",        "--set",    "data.size=32",
                                "--json"};
  for (const std::string& way : ways) args.insert(args.end(), {"--way", way});
  const CommandResult r = Bench(args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string json = JsonLine(r.output);
  ASSERT_TRUE(Balanced(json)) << r.output;
  ExpectFields(json, {"machine", "budget_bytes", "scale", "rows"});
  EXPECT_EQ(JsonField(json, "budget_bytes"), std::to_string(16 << 20));
  std::map<std::string, long long> params;
  size_t at = json.find("\"rows\":");
  for (size_t row = json.find("{\"way\"", at); row != std::string::npos;
       row = json.find("{\"way\"", row + 1)) {
    const std::string one = json.substr(row, json.find('}', row) - row + 1);
    const std::string way = JsonField(one, "way");
    ASSERT_GT(std::stoi(JsonField(one, "scale")), 0) << "nothing trained: " << one;
    EXPECT_LE(std::stoll(JsonField(one, "peak_device_tensor_bytes")), 16ll << 20) << one;
    EXPECT_GT(std::stoll(JsonField(one, "probes")), 1) << one;
    params[way] = std::stoll(JsonField(one, "parameters"));
    EXPECT_EQ(JsonField(one, "lean"), way.find(", lean") != std::string::npos ? "true" : "false")
        << one;
  }
  ASSERT_EQ(params.size(), ways.size()) << json;
  for (const std::string& way : ways) EXPECT_EQ(params.count(way), 1u) << way << " in " << json;
  // Parked kept inputs hold less than keeping them, in one process and in turns.
  EXPECT_GE(params["single-process, offload"], params["single-process, checkpointing"]) << json;
  EXPECT_GE(params["pipeline offload+park"], params["pipeline recompute+park"]) << json;
  EXPECT_GE(params["single-process, offload, mb of 1"],
            params["single-process, checkpointing blocks, mb of 1"])
      << json;
  EXPECT_GE(params["pipeline offload+park, mb of 1"],
            params["pipeline recompute blocks+park, mb of 1"])
      << json;
  EXPECT_GT(params["pipeline recompute+park, mb of 1"], params["single-process"]) << json;
  // Four stages in turns hold less a turn than two.
  EXPECT_GE(params["4 stages recompute+park"], params["pipeline recompute+park"]) << json;
  EXPECT_GE(params["4 stages recompute+park, mb of 1"], params["pipeline recompute+park, mb of 1"])
      << json;
  EXPECT_GE(params["single-process, micro-batches of 1"], params["single-process"]);
  // Lean blocks hold less: the same way trains at least as large a model.
  EXPECT_GE(params["pipeline offload+park, mb of 1, lean"],
            params["pipeline offload+park, mb of 1"])
      << json;
}

// --only lean runs the lean group alone; where the config has no lean
// blocks (bf16 here) its rows say why, and nothing else runs.
TEST(BenchStep, LeanAloneSaysWhyWhereTheModelHasNoLeanBlocks) {
  const CommandResult r =
      Bench({"step", "--config", SourcePath("configs/tiny.yaml"), "--json", "--only", "lean",
             "--steps", "2", "--rounds", "1", "--warmup", "1", "--set", "train.precision=bf16"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string json = JsonLine(r.output);
  EXPECT_EQ(JsonField(json, "only"), "lean") << json;
  EXPECT_EQ(json.find("\"label\":\"single\""), std::string::npos)
      << "only the lean group: " << json;
  EXPECT_EQ(json.find("pipeline_breakdown"), std::string::npos) << json;
  for (const char* label : {"single lean", "single offload lean", "pipeline offload lean"}) {
    const size_t at = json.find(std::string("\"label\":\"") + label + "\"");
    ASSERT_NE(at, std::string::npos) << label << " in " << json;
    const std::string row = json.substr(at, json.find('}', at) - at);
    EXPECT_NE(row.find("\"built\":false"), std::string::npos) << row;
    EXPECT_NE(row.find("fp32 only"), std::string::npos) << row;
  }
}

TEST(BenchBadArgs, ExitTwoWithOneLine) {
  ExpectOneLineExit2({});
  ExpectOneLineExit2({"nope"});
  ExpectOneLineExit2({"transport", "--max-bytes", "100"});
  ExpectOneLineExit2({"transport", "--max-bytes", "lots"});
  ExpectOneLineExit2({"transport", "--repeats", "0"});
  ExpectOneLineExit2({"transport", "--frobnicate"});
  ExpectOneLineExit2({"step"});
  ExpectOneLineExit2({"step", "--config", SourcePath("configs/tiny.yaml"), "--rounds", "0"});
  ExpectOneLineExit2(
      {"step", "--config", SourcePath("configs/tiny.yaml"), "--steps", "3", "--warmup", "3"});
  ExpectOneLineExit2({"step", "--config", "/nonexistent/config.yaml"});
  ExpectOneLineExit2({"step", "--config", SourcePath("configs/tiny.yaml"), "--only", "fast"});
  ExpectOneLineExit2({"step", "--config", SourcePath("configs/tiny.yaml"), "--budget", "a lot"});
  ExpectOneLineExit2({"memory"});
  ExpectOneLineExit2({"memory", "--config", SourcePath("configs/tiny.yaml"), "--steps", "-1"});
  ExpectOneLineExit2({"capacity", "--config", SourcePath("configs/tiny.yaml")});
  ExpectOneLineExit2(
      {"capacity", "--config", SourcePath("configs/tiny.yaml"), "--budget", "a lot"});
  ExpectOneLineExit2({"capacity", "--config", SourcePath("configs/tiny.yaml"), "--budget", "16MiB",
                      "--scale", "depth"});
  ExpectOneLineExit2({"capacity", "--config", SourcePath("configs/tiny.yaml"), "--budget", "16MiB",
                      "--way", "pipeline, fast"});
}

}  // namespace
}  // namespace up::test
