// See check.h.
#include "launcher/tools/check.h"

#include <stdlib.h>

#include <cxxopts.hpp>
#include <filesystem>
#include <iostream>
#include <map>

#include "common/base/child_process.h"
#include "common/base/command_line.h"
#include "common/base/errors.h"
#include "common/base/logging.h"
#include "common/config/config_file.h"
#include "common/data/dataset.h"
#include "common/layout/pipeline_layout.h"
#include "common/model/loss.h"
#include "common/model/tensor_diff.h"
#include "common/model/tensor_file.h"
#include "common/model/unet.h"
#include "common/run/recording_format.h"
#include "common/training/stage_optimizer.h"

namespace up {
namespace {

namespace fs = std::filesystem;

std::string SelfExe() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw RuntimeError("cannot find this program's path: " + ec.message());
  return self.string();
}

// A scratch folder removed at the end unless the user asked to keep it.
struct Scratch {
  explicit Scratch(const std::string& keep) : path(keep), keep(!keep.empty()) {
    if (keep.empty()) {
      char tmpl[] = "/tmp/up-check-XXXXXX";
      if (!mkdtemp(tmpl)) throw RuntimeError("cannot create a folder under /tmp");
      path = tmpl;
    }
    fs::create_directories(path);
  }
  ~Scratch() {
    std::error_code ec;
    if (!keep) fs::remove_all(path, ec);
  }
  std::string path;
  bool keep;
};

// The keys of the encoder's or the decoder's parts ("encoder", or "encoder1" ..).
std::vector<std::string> PartKeys(const PipelineLayout& layout, bool encoder) {
  std::vector<std::string> keys;
  for (const StageSpec& s : layout.stages)
    if (s.encoder == encoder) keys.push_back(s.Key());
  return keys;
}

// Compares `state` (one half's parameters and buffers) with what the half's
// parts recorded at `step`: each tensor with the copy of the part that holds it.
void CompareWeights(DiffReport& report, const std::string& dir, const recording::Index& index,
                    const std::vector<std::string>& parts, int64_t step,
                    const NamedTensors& state) {
  std::vector<std::pair<std::string, NamedTensors>> recorded;  // (file stem, tensors)
  for (const std::string& part : parts) {
    const std::string stem = fs::path(recording::WeightsFile(part, step)).stem().string();
    const recording::Entry* e = index.Find("weights", part, step);
    if (!e) {
      report.Missing(stem, "the pipeline did not record it");
      continue;
    }
    recorded.emplace_back(stem, LoadTensorFile((fs::path(dir) / e->file).string()));
  }
  if (recorded.size() != parts.size()) return;
  for (const auto& [name, t] : state) {
    bool found = false;
    for (const auto& [stem, want] : recorded) {
      auto it =
          std::find_if(want.begin(), want.end(), [&](const auto& w) { return w.first == name; });
      if (it == want.end()) continue;
      report.Compare(stem + ":" + name, t, it->second);
      found = true;
      break;
    }
    if (!found)
      report.Missing(recorded.front().first + ":" + name, "not in the pipeline's weights");
  }
}

// Compares what channel `c` carried in `direction` with the reference's
// tensors of the same wire names; names the reference does not tap (inside a
// half) are skipped.
void CompareChannel(DiffReport& report, const std::string& dir, const recording::Index& index,
                    const PipelineLayout& layout, int c, const std::string& direction, int64_t step,
                    int mb, const std::map<std::string, torch::Tensor>& reference) {
  const int file_channel = recording::FileChannel(c, layout.channels.size());
  const std::string stem =
      fs::path(recording::BoundaryFile(direction, step, mb, file_channel)).stem().string();
  const recording::Entry* e = index.FindBoundary(direction, c, step, mb);
  if (!e) return report.Missing(stem, "the pipeline did not record it");
  for (const auto& [name, t] : LoadTensorFile((fs::path(dir) / e->file).string())) {
    auto it = reference.find(name);
    if (it != reference.end()) report.Compare(stem + ":" + name, it->second, t);
  }
}

// The reference: single-process training (as RunSingleProcess does it), with
// views tapping the boundary between the halves so the decoder's share of its
// gradients shows. Compared at each step: every part's weights, each
// micro-batch's loss, every skip and the bottleneck on each channel that
// carries them, and the gradients the decoder's parts send back to the
// encoder's. What flows between two parts of one half (a decoder level's
// output, a head's logits, an encoder level's gradient) has no tap in one
// process; the weights it leads to are compared.
void CompareWithReference(const Config& config, const std::string& dir, DiffReport& report) {
  const recording::Index index = recording::ReadIndex(dir);
  const PipelineLayout layout = ResolveLayout(config);
  const std::vector<std::string> encoder_keys = PartKeys(layout, true);
  const std::vector<std::string> decoder_keys = PartKeys(layout, false);
  const std::string loss_key = layout.stages.back().Key();
  const TrainConfig& t = config.train;
  UNet model(config.model, t.seed, t.deep_supervision);
  const LossSpec loss_spec = MakeLossSpec(config);
  model->train();
  StageOptimizer enc_opt(*model->encoder, t);
  StageOptimizer dec_opt(*model->decoder, t);
  auto data = MakeDataset(config);
  for (int64_t step = 0; step < t.steps; ++step) {
    const int failures_before = static_cast<int>(report.failures().size());
    CompareWeights(report, dir, index, encoder_keys, step, NamedState(*model->encoder));
    CompareWeights(report, dir, index, decoder_keys, step, NamedState(*model->decoder));
    enc_opt.BeginStep(step);
    dec_opt.BeginStep(step);
    for (int mb = 0; mb < t.micro_batches; ++mb) {
      MicroBatch batch = LoadMicroBatch(*data, config, step, mb);
      Boundary b = model->encoder->forward(batch.images);  // as the encoder sends it
      Boundary tapped;  // views: their grads are the decoder's share (what it sends back)
      tapped.bottleneck = b.bottleneck.view_as(b.bottleneck);
      for (const auto& s : b.skips) tapped.skips.push_back(s.view_as(s));
      std::map<std::string, torch::Tensor> values{{"bottleneck", tapped.bottleneck}};
      for (size_t i = 0; i < tapped.skips.size(); ++i)
        values["skip" + std::to_string(i)] = tapped.skips[i];
      for (auto& [name, tap] : values) tap.retain_grad();
      for (size_t c = 0; c < layout.channels.size(); ++c)
        CompareChannel(report, dir, index, layout, static_cast<int>(c), "forward", step, mb,
                       values);
      std::vector<torch::Tensor> outputs = model->decoder->forward(tapped);  // [0]: (n, K, *S)
      torch::Tensor loss = SegmentationLoss(outputs, batch.masks, loss_spec) / t.micro_batches;
      loss.backward();
      const std::string loss_label = "loss-s" + std::to_string(step) + "-m" + std::to_string(mb);
      if (const recording::Entry* e = index.Find("loss", loss_key, step, mb)) {
        report.Compare(loss_label, torch::tensor(loss.item<double>(), torch::kFloat64),
                       torch::tensor(e->value, torch::kFloat64));
      } else {
        report.Missing(loss_label, "the pipeline did not record it");
      }
      std::map<std::string, torch::Tensor> grads;
      for (const auto& [name, tap] : values) grads[name] = tap.grad();
      // A channel from an encoder part to a decoder part carries the
      // decoder's share of a skip's gradient, which the taps hold; between
      // encoder parts it carries the deeper levels' share, which they do not.
      for (size_t c = 0; c < layout.channels.size(); ++c) {
        const StageChannel& ch = layout.channels[c];
        if (!layout.stages[static_cast<size_t>(ch.from)].encoder ||
            layout.stages[static_cast<size_t>(ch.to)].encoder)
          continue;
        CompareChannel(report, dir, index, layout, static_cast<int>(c), "backward", step, mb,
                       grads);
      }
    }
    torch::Tensor norms = torch::cat({enc_opt.GradNorms(), dec_opt.GradNorms()});  // (P,)
    enc_opt.Step(norms);
    dec_opt.Step(norms);
    const int bad = static_cast<int>(report.failures().size()) - failures_before;
    std::printf("step %lld: %s\n", static_cast<long long>(step + 1),
                bad ? (std::to_string(bad) + " tensors differ").c_str()
                    : "weights, boundary, loss and gradients match");
  }
  CompareWeights(report, dir, index, encoder_keys, t.steps, NamedState(*model->encoder));
  CompareWeights(report, dir, index, decoder_keys, t.steps, NamedState(*model->decoder));
}

}  // namespace

int CheckMain(int argc, char** argv) {
  cxxopts::Options options("unet-pipeline check",
                           "Train the pipeline and the single-process reference side by side and "
                           "compare every tensor at every step.");
  options.add_options()("config", "YAML config file", cxxopts::value<std::string>())(
      "steps", "steps to train and compare", cxxopts::value<int64_t>()->default_value("2"))(
      "set", "override a key: --set key.path=value (repeatable)",
      cxxopts::value<std::vector<std::string>>())("atol", "absolute tolerance",
                                                  cxxopts::value<double>()->default_value("0"))(
      "rtol", "relative tolerance", cxxopts::value<double>()->default_value("0"))(
      "keep", "keep the pipeline's run and recording in this folder",
      cxxopts::value<std::string>())("v,verbose", "print every tensor compared")("h,help",
                                                                                 "this help");
  const auto parsed = ParseCommandLine(options, argc, argv, "unet-pipeline check --help");
  if (!parsed) return 0;
  const cxxopts::ParseResult& args = *parsed;
  InitLogging("check", LogLevel::kWarn);
  if (!args.count("config")) throw UsageError("check needs --config FILE");
  const std::string config_path = args["config"].as<std::string>();
  const int64_t steps = args["steps"].as<int64_t>();
  if (steps < 1) throw UsageError("--steps " + std::to_string(steps) + ": must be >= 1");
  std::vector<std::string> overrides =
      args.count("set") ? RejoinOverrides(args["set"].as<std::vector<std::string>>())
                        : std::vector<std::string>{};
  overrides.push_back("train.steps=" + std::to_string(steps));
  const Config config = LoadConfig(config_path, overrides);
  const Tolerance tol{args["atol"].as<double>(), args["rtol"].as<double>()};
  if (tol.atol < 0 || tol.rtol < 0) throw UsageError("--atol and --rtol must be >= 0");

  Scratch scratch(args.count("keep") ? args["keep"].as<std::string>() : "");
  const std::string recording = (fs::path(scratch.path) / "recording").string();
  std::vector<std::string> train{"train",
                                 "--config",
                                 config_path,
                                 "--out",
                                 (fs::path(scratch.path) / "pipeline").string(),
                                 "--record",
                                 recording,
                                 "--record-steps",
                                 std::to_string(steps),
                                 "-q"};
  for (const std::string& o : overrides) train.insert(train.end(), {"--set", o});
  std::cout << "check: training the pipeline for " << steps << " steps (recording every tensor)"
            << std::endl;
  ChildProcess child = ChildProcess::Spawn({"pipeline", SelfExe(), train, {}, true, ""});
  const ExitStatus status = child.Wait(std::chrono::steady_clock::now() + std::chrono::hours(24));
  if (!status.success()) {
    throw RuntimeError("the pipeline run " + status.Describe() +
                       "; run it alone to see why: unet-pipeline train --config " + config_path);
  }

  std::cout << "check: training the single-process reference and comparing" << std::endl;
  torch::set_num_threads(config.train.threads);
  DiffReport report(std::cout, tol, args.count("verbose") > 0);
  CompareWithReference(config, recording, report);
  if (report.failures().empty()) {
    std::cout << "check passed: " << report.Summary() << std::endl;
    return 0;
  }
  std::cout << "check FAILED: " << report.Summary() << std::endl;
  if (!scratch.keep) std::cout << "(keep the recording with --keep DIR to inspect it)" << std::endl;
  return 1;
}

}  // namespace up
