// See bench_cli.h. Only argument parsing and printing live here; each bench is
// in its own file (bench_transport, bench_step, bench_memory).
#include "bench/bench_cli.h"

#include <algorithm>
#include <cstdio>
#include <cxxopts.hpp>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_capacity.h"
#include "bench/bench_memory.h"
#include "bench/bench_replicas.h"
#include "bench/bench_stages.h"
#include "bench/bench_step.h"
#include "bench/bench_transport.h"
#include "common/base/command_line.h"
#include "common/base/errors.h"
#include "common/config/config_file.h"

namespace up {
namespace {

constexpr const char* kBenchUsage =
    "usage: unet-pipeline bench <transport|step|stages|replicas|memory|capacity> [options]\n"
    "  transport  one-way throughput and latency of each transport next to memcpy\n"
    "  step       median step time: pipeline vs single-process, and the schedules\n"
    "  stages     2, 3 and 4 stages under each schedule: step time, bubble, first stage's peak\n"
    "  replicas   copies of the pipeline: step time, each stage's gradient exchange vs Gloo\n"
    "  memory     peak RSS per stage process vs the single-process trainer\n"
    "  capacity   the largest model (or patch) each way of training fits in --budget\n"
    "run `unet-pipeline bench <bench> --help` for its options";

// "2,3,4" as numbers; UsageError naming `flag` otherwise.
std::vector<int> NumberList(const std::string& list, const std::string& flag) {
  std::vector<int> out;
  size_t at = 0;
  while (at <= list.size()) {
    const size_t comma = std::min(list.find(',', at), list.size());
    const std::string item = list.substr(at, comma - at);
    try {
      size_t used = 0;
      out.push_back(std::stoi(item, &used));
      if (used != item.size()) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      throw UsageError(flag + " '" + list + "': expected numbers like 1,2,4");
    }
    at = comma + 1;
  }
  return out;
}

// Parses argv with `options` (plus --json and --help); nullopt after --help.
std::optional<cxxopts::ParseResult> Parse(cxxopts::Options& options, int argc, char** argv) {
  options.add_options()("json", "print one JSON object instead of a table")("h,help", "this help");
  return ParseCommandLine(options, argc, argv, "unet-pipeline " + options.program() + " --help");
}

template <typename T>
T Get(const cxxopts::ParseResult& args, const std::string& name, T fallback) {
  try {
    return args.count(name) ? args[name].as<T>() : fallback;
  } catch (const cxxopts::exceptions::exception& e) {
    throw UsageError("--" + name + ": " + e.what());
  }
}

int Transport(int argc, char** argv) {
  cxxopts::Options options("bench transport", "One-way throughput and latency per transport.");
  options.add_options()("max-bytes", "largest message (default 268435456)",
                        cxxopts::value<int64_t>())("repeats", "timed streams per size (default 3)",
                                                   cxxopts::value<int>())(
      "seconds", "target length of one timed stream (default 0.25)", cxxopts::value<double>());
  const auto args = Parse(options, argc, argv);
  if (!args) return 0;
  bench::TransportOptions o;
  const int64_t max_bytes = Get<int64_t>(*args, "max-bytes", static_cast<int64_t>(o.max_bytes));
  if (max_bytes < 0)
    throw UsageError("--max-bytes " + std::to_string(max_bytes) + " is negative; use >= 4096");
  o.max_bytes = static_cast<uint64_t>(max_bytes);
  o.repeats = Get<int>(*args, "repeats", o.repeats);
  o.seconds = Get<double>(*args, "seconds", o.seconds);
  const auto rows = bench::RunTransportBench(o);
  std::cout << (args->count("json") ? bench::TransportJson(rows, o) + "\n"
                                    : bench::TransportTable(rows, o))
            << std::flush;
  return 0;
}

int Step(int argc, char** argv) {
  cxxopts::Options options("bench step", "Median step time: pipeline vs single-process.");
  options.add_options()("config", "YAML config file", cxxopts::value<std::string>())(
      "steps", "steps per run (default 8)", cxxopts::value<int64_t>())(
      "rounds", "runs per row, alternated (default 3)", cxxopts::value<int>())(
      "warmup", "leading steps of each run left out (default 2)", cxxopts::value<int64_t>())(
      "budget",
      "the offload rows under this device budget, each at the fewest micro-batches that fit",
      cxxopts::value<std::string>())(
      "only", "run one group alone: lean (three ways as written against model.memory: lean)",
      cxxopts::value<std::string>())("set", "override a config key in every run (repeatable)",
                                     cxxopts::value<std::vector<std::string>>());
  const auto args = Parse(options, argc, argv);
  if (!args) return 0;
  bench::StepOptions o;
  o.budget = Get<std::string>(*args, "budget", "");
  o.only = Get<std::string>(*args, "only", "");
  o.config = Get<std::string>(*args, "config", "");
  o.steps = Get<int64_t>(*args, "steps", o.steps);
  o.rounds = Get<int>(*args, "rounds", o.rounds);
  o.warmup = Get<int64_t>(*args, "warmup", o.warmup);
  o.sets = RejoinOverrides(Get<std::vector<std::string>>(*args, "set", {}));
  const bench::StepReport report = bench::RunStepBench(o);
  std::cout << (args->count("json") ? bench::StepJson(report) + "\n" : bench::StepTable(report))
            << std::flush;
  return 0;
}

int Stages(int argc, char** argv) {
  cxxopts::Options options("bench stages",
                           "2, 3 and 4 stages under each schedule: step time, bubble, peak.");
  options.add_options()("config", "YAML config file", cxxopts::value<std::string>())(
      "stages", "stage counts (default 2,3,4)", cxxopts::value<std::string>())(
      "layouts", "instead of --stages: each half's parts per run, e.g. 1+1,1+2,2+2",
      cxxopts::value<std::string>())("steps", "steps per run (default 6)",
                                     cxxopts::value<int64_t>())(
      "warmup", "leading steps of each run left out (default 2)", cxxopts::value<int64_t>())(
      "set", "override a config key in every run (repeatable)",
      cxxopts::value<std::vector<std::string>>());
  const auto args = Parse(options, argc, argv);
  if (!args) return 0;
  bench::StagesOptions o;
  o.config = Get<std::string>(*args, "config", "");
  if (o.config.empty()) throw UsageError("bench stages needs --config FILE");
  if (args->count("stages")) o.stages = NumberList((*args)["stages"].as<std::string>(), "--stages");
  if (args->count("layouts")) {
    const std::string text = (*args)["layouts"].as<std::string>();
    std::stringstream in(text);
    for (std::string item; std::getline(in, item, ',');) {
      int e = 0, d = 0;
      char plus = 0, rest = 0;
      if (std::sscanf(item.c_str(), "%d%c%d%c", &e, &plus, &d, &rest) != 3 || plus != '+')
        throw UsageError("bench stages: --layouts " + text + ": \"" + item +
                         "\" is not ENCODER_PARTS+DECODER_PARTS (e.g. 1+2)");
      o.layouts.emplace_back(e, d);
    }
  }
  o.steps = Get<int64_t>(*args, "steps", o.steps);
  o.warmup = Get<int64_t>(*args, "warmup", o.warmup);
  o.sets = RejoinOverrides(Get<std::vector<std::string>>(*args, "set", {}));
  const bench::StagesReport report = bench::RunStagesBench(o);
  std::cout << (args->count("json") ? bench::StagesJson(report) + "\n" : bench::StagesTable(report))
            << std::flush;
  return 0;
}

int Replicas(int argc, char** argv) {
  cxxopts::Options options("bench replicas",
                           "Copies of the pipeline: step time and each stage's gradient exchange.");
  options.add_options()("config", "YAML config file", cxxopts::value<std::string>())(
      "replicas", "replica counts (default 1,2; 4 with 8 cores)", cxxopts::value<std::string>())(
      "steps", "steps per run (default 6)", cxxopts::value<int64_t>())(
      "warmup", "leading steps of each run left out (default 2)", cxxopts::value<int64_t>())(
      "set", "override a config key in every run (repeatable)",
      cxxopts::value<std::vector<std::string>>());
  const auto args = Parse(options, argc, argv);
  if (!args) return 0;
  bench::ReplicasOptions o;
  o.config = Get<std::string>(*args, "config", "");
  if (o.config.empty()) throw UsageError("bench replicas needs --config FILE");
  if (args->count("replicas"))
    o.replicas = NumberList((*args)["replicas"].as<std::string>(), "--replicas");
  o.steps = Get<int64_t>(*args, "steps", o.steps);
  o.warmup = Get<int64_t>(*args, "warmup", o.warmup);
  o.sets = RejoinOverrides(Get<std::vector<std::string>>(*args, "set", {}));
  const bench::ReplicasReport report = bench::RunReplicasBench(o);
  std::cout << (args->count("json") ? bench::ReplicasJson(report) + "\n"
                                    : bench::ReplicasTable(report))
            << std::flush;
  return 0;
}

int Memory(int argc, char** argv) {
  cxxopts::Options options("bench memory", "Peak RSS per stage vs single-process.");
  options.add_options()("config", "YAML config file", cxxopts::value<std::string>())(
      "steps", "steps per run (default 3)", cxxopts::value<int64_t>())(
      "set", "override a config key in both runs (repeatable)",
      cxxopts::value<std::vector<std::string>>());
  const auto args = Parse(options, argc, argv);
  if (!args) return 0;
  bench::MemoryOptions o;
  o.config = Get<std::string>(*args, "config", "");
  o.steps = Get<int64_t>(*args, "steps", o.steps);
  o.sets = RejoinOverrides(Get<std::vector<std::string>>(*args, "set", {}));
  const bench::MemoryReport report = bench::RunMemoryBench(o);
  std::cout << (args->count("json") ? bench::MemoryJson(report) + "\n" : bench::MemoryTable(report))
            << std::flush;
  return 0;
}

int Capacity(int argc, char** argv) {
  cxxopts::Options options("bench capacity",
                           "The largest model or patch each way of training fits in a budget.");
  options.add_options()("config", "YAML config file", cxxopts::value<std::string>())(
      "budget", "device memory, as train.memory_budget takes it (16GiB)",
      cxxopts::value<std::string>())("scale", "features | patch (default features)",
                                     cxxopts::value<std::string>())(
      "steps", "steps per probe (default 2)", cxxopts::value<int64_t>())(
      "max-scale", "stop the search there (default 4096)", cxxopts::value<int>())(
      "way", "only this way (a row's name, e.g. 'pipeline offload+park'; repeatable)",
      cxxopts::value<std::vector<std::string>>())("set",
                                                  "override a config key in every run (repeatable)",
                                                  cxxopts::value<std::vector<std::string>>());
  const auto args = Parse(options, argc, argv);
  if (!args) return 0;
  bench::CapacityOptions o;
  o.config = Get<std::string>(*args, "config", "");
  o.budget = Get<std::string>(*args, "budget", "");
  o.scale = Get<std::string>(*args, "scale", o.scale);
  o.steps = Get<int64_t>(*args, "steps", o.steps);
  o.max_scale = Get<int>(*args, "max-scale", o.max_scale);
  if (o.max_scale < 1) throw UsageError("--max-scale must be at least 1");
  o.sets = RejoinOverrides(Get<std::vector<std::string>>(*args, "set", {}));
  o.ways = Get<std::vector<std::string>>(*args, "way", {});  // names keep their commas
  const bench::CapacityReport report = bench::RunCapacityBench(o);
  std::cout << (args->count("json") ? bench::CapacityJson(report) + "\n"
                                    : bench::CapacityTable(report))
            << std::flush;
  return 0;
}

}  // namespace

int BenchMain(int argc, char** argv) {
  if (argc < 2)
    throw UsageError("bench needs one of: transport, step, stages, replicas, memory, capacity");
  const std::string which = argv[1];
  if (which == "-h" || which == "--help") {
    std::cout << kBenchUsage << std::endl;
    return 0;
  }
  if (which == "transport") return Transport(argc - 1, argv + 1);
  if (which == "step") return Step(argc - 1, argv + 1);
  if (which == "stages") return Stages(argc - 1, argv + 1);
  if (which == "replicas") return Replicas(argc - 1, argv + 1);
  if (which == "memory") return Memory(argc - 1, argv + 1);
  if (which == "capacity") return Capacity(argc - 1, argv + 1);
  throw UsageError("unknown bench '" + which +
                   "'; use transport, step, stages, replicas, memory or capacity");
}

}  // namespace up
