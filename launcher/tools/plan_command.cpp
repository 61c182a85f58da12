// `unet-pipeline plan --config C [--set k=v]... [--gpu-mem 16GiB] [--json]`:
// predicts peak device memory of single-process training and of the
// pipeline under each activation policy, and says whether each fits.
#include <cstdio>
// `--set key=[a,b]` is one value: vector options are not split at commas.
// Every file that includes cxxopts defines this alike (its parsers are inline).
#define CXXOPTS_VECTOR_DELIMITER '\0'
#include <cxxopts.hpp>
#include <iostream>

#include "common/command_line.h"
#include "common/config.h"
#include "common/errors.h"
#include "common/json_writer.h"
#include "launcher/tools/memory_plan.h"
#include "launcher/tools/plan_command.h"

namespace up {

int PlanCommand(int argc, char** argv) {
  cxxopts::Options options("unet-pipeline plan",
                           "Predict peak device memory from the config's shapes.");
  options.add_options()("config", "YAML config file", cxxopts::value<std::string>())(
      "set", "override a key (repeatable)", cxxopts::value<std::vector<std::string>>())(
      "gpu-mem", "device memory to fit in", cxxopts::value<std::string>()->default_value("16GiB"))(
      "json", "print JSON")("h,help", "this help");
  const auto parsed = ParseCommandLine(options, argc, argv, "unet-pipeline plan --help");
  if (!parsed) return 0;
  const cxxopts::ParseResult& args = *parsed;
  if (!args.count("config")) throw UsageError("plan needs --config FILE");
  const Config config =
      LoadConfig(args["config"].as<std::string>(),
                 args.count("set") ? RejoinOverrides(args["set"].as<std::vector<std::string>>())
                                   : std::vector<std::string>{});
  const int64_t budget = ParseBytes(args["gpu-mem"].as<std::string>());
  const std::vector<PlanRow> rows = PlanMemory(config, budget);
  const StageCounts enc = EncoderCounts(config), dec = DecoderCounts(config);

  if (args.count("json")) {
    std::string list = "[";
    for (size_t i = 0; i < rows.size(); ++i) {
      JsonWriter w;
      w.Field("name", rows[i].name)
          .Field("peak_phase", rows[i].peak_phase)
          .Field("state_bytes", rows[i].state_bytes)
          .Field("activation_bytes", rows[i].activation_bytes)
          .Field("boundary_bytes", rows[i].boundary_bytes)
          .Field("workspace_bytes", rows[i].workspace_bytes)
          .Field("context_bytes", rows[i].context_bytes)
          .Field("peak_bytes", rows[i].peak_bytes)
          .Field("fits", rows[i].fits);
      list += (i ? "," : "") + w.str();
    }
    JsonWriter out;
    out.Field("budget_bytes", budget)
        .Field("encoder_parameters", enc.parameters)
        .Field("decoder_parameters", dec.parameters)
        .Raw("rows", list + "]");
    std::cout << out.str() << std::endl;
    return 0;
  }
  std::printf(
      "plan for %s: %d-D, %.1fM parameters (encoder %.1fM, decoder %.1fM), batch %d in %d "
      "micro-batch(es), %s\n",
      args["config"].as<std::string>().c_str(), config.model.dims,
      (enc.parameters + dec.parameters) / 1e6, enc.parameters / 1e6, dec.parameters / 1e6,
      config.train.batch_size, config.train.micro_batches, config.train.precision.c_str());
  std::printf("device budget %s; context allowance %s per process\n\n", FormatBytes(budget).c_str(),
              FormatBytes(kContextAllowanceBytes).c_str());
  std::printf("%-20s %10s %12s %10s %10s %10s %10s  %-5s %s\n", "", "state", "activations",
              "boundary", "workspace", "context", "peak", "fits", "peak during");
  for (const PlanRow& r : rows) {
    std::printf("%-20s %10s %12s %10s %10s %10s %10s  %-5s %s\n", r.name.c_str(),
                FormatBytes(r.state_bytes).c_str(), FormatBytes(r.activation_bytes).c_str(),
                FormatBytes(r.boundary_bytes).c_str(), FormatBytes(r.workspace_bytes).c_str(),
                FormatBytes(r.context_bytes).c_str(), FormatBytes(r.peak_bytes).c_str(),
                r.fits ? "yes" : "NO", r.peak_phase.c_str());
  }
  std::printf(
      "\nstate = weights + gradients + optimizer state; the pipeline rows assume both stages "
      "share\n"
      "the device and park between turns. An estimate from shapes: see docs/ARCHITECTURE.md.\n");
  return 0;
}

}  // namespace up
