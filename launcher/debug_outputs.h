// The launcher's side of `train --record DIR` and `train --trace FILE`: the
// stage flags that turn them on, the recording folder's config.yaml and
// index.json, and the merge of every process's trace part into one file.
//
// The stages do the recording and write their own trace parts
// (stage/stage_observer.h); the launcher writes its own part (turns held, lock
// waits) and merges the three into FILE when the run ends, also after a
// failure (best effort), so a failed run can be looked at too.
#pragma once

#include <string>
#include <vector>

#include "common/config/config.h"

namespace up {

struct DebugOutputs {
  std::string record_dir;  // empty: no recording
  int record_steps = 1;    // the first N steps of the run
  std::string trace_file;  // empty: no trace
  std::string verbosity;   // "-v", "-q" or "": the launcher's own, passed on to the stages
};

// The flags for a stage process (`stage`: "encoder" or "decoder"), with the
// launcher's -v/-q.
std::vector<std::string> StageDebugArgs(const DebugOutputs& debug, const std::string& stage);

// Creates the recording folder and writes its config.yaml (no-op when off).
void BeginRecording(const DebugOutputs& debug, const Config& config);
// Merges the stages' index lines into index.json (no-op when off).
void FinishRecording(const DebugOutputs& debug, const Config& config);

// Traces the launcher from construction; Merge() (or the destructor, on the
// way out of a failed run) writes the merged trace.
class TraceSession {
 public:
  // `stages`: the keys of the stages whose part files Merge collects.
  TraceSession(const DebugOutputs& debug, std::vector<std::string> stages);
  ~TraceSession();
  TraceSession(const TraceSession&) = delete;
  TraceSession& operator=(const TraceSession&) = delete;
  void Merge();

 private:
  std::string file_;
  std::vector<std::string> stages_;
  bool merged_ = false;
};

}  // namespace up
