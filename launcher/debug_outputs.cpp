// See debug_outputs.h.
#include "launcher/debug_outputs.h"

#include <filesystem>

#include "common/base/errors.h"
#include "common/base/fs_util.h"
#include "common/base/logging.h"
#include "common/base/trace.h"
#include "common/config/config_file.h"
#include "common/layout/pipeline_layout.h"
#include "common/run/recording_format.h"

namespace up {
namespace {

namespace fs = std::filesystem;

std::string TracePart(const std::string& file, const std::string& process) {
  return file + "." + process + ".part";
}

}  // namespace

std::vector<std::string> StageDebugArgs(const DebugOutputs& debug, const std::string& stage) {
  std::vector<std::string> args;
  if (!debug.record_dir.empty()) {
    args.insert(args.end(), {"--record", debug.record_dir, "--record-steps",
                             std::to_string(debug.record_steps)});
  }
  if (!debug.trace_file.empty())
    args.insert(args.end(), {"--trace", TracePart(debug.trace_file, stage)});
  if (!debug.verbosity.empty()) args.push_back(debug.verbosity);
  return args;
}

void BeginRecording(const DebugOutputs& debug, const Config& config) {
  if (debug.record_dir.empty()) return;
  if (debug.record_steps < 1)
    throw UsageError("--record-steps " + std::to_string(debug.record_steps) + ": must be >= 1");
  std::error_code ec;
  fs::create_directories(debug.record_dir, ec);
  if (ec) {
    throw UsageError("--record " + debug.record_dir +
                     ": cannot create the folder: " + ec.message());
  }
  fs::remove(fs::path(debug.record_dir) / recording::kIndexFile, ec);
  WriteFileAtomic((fs::path(debug.record_dir) / recording::kConfigFile).string(),
                  DumpConfig(config));
}

void FinishRecording(const DebugOutputs& debug, const Config& config) {
  if (debug.record_dir.empty()) return;
  const PipelineLayout layout = ResolveLayout(config);
  std::vector<std::string> keys;
  for (const StageSpec& s : layout.stages) keys.push_back(s.Key());
  recording::WriteIndex(debug.record_dir, DumpConfig(config), config.train.micro_batches, keys);
  LogInfo("recording in " + debug.record_dir + " (replay a stage: encoder_proc --replay " +
          debug.record_dir + (layout.two_stage() ? "" : " --part N") + ")");
}

TraceSession::TraceSession(const DebugOutputs& debug, std::vector<std::string> stages)
    : file_(debug.trace_file), stages_(std::move(stages)) {
  if (!file_.empty()) StartTracing(TracePart(file_, "launcher"), "unet-pipeline (launcher)");
}

TraceSession::~TraceSession() {
  try {
    Merge();
  } catch (const std::exception& e) {
    LogWarn(std::string("trace not written: ") + e.what());
  }
}

void TraceSession::Merge() {
  if (file_.empty() || merged_) return;
  merged_ = true;
  StopTracing();
  std::vector<std::string> parts{TracePart(file_, "launcher")};
  for (const std::string& stage : stages_) parts.push_back(TracePart(file_, stage));
  MergeTraceParts(parts, file_);
  LogInfo("trace in " + file_ + " (open it in chrome://tracing or ui.perfetto.dev)");
}

}  // namespace up
