// Chrome trace events (chrome://tracing, Perfetto) for `train --trace FILE`.
//
// Each process writes its own part file: one JSON event per line, the first
// naming the process ("M" metadata), then complete ("X") events whose `ts` and
// `dur` are CLOCK_MONOTONIC microseconds, a clock every process on the machine
// shares. The launcher merges the parts into FILE when the run ends.
//
// Tracing is off until StartTracing(); until then a TraceSpan costs a branch.
// One tracer per process; safe to use from several threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace up {

// The event names every process uses, so a trace reads the same everywhere.
namespace trace_event {
inline constexpr const char* kTurnHeld = "turn held";      // launcher: a stage holds its device
inline constexpr const char* kLockWait = "lock wait";      // launcher: acquiring a device lock
inline constexpr const char* kWaitTurn = "wait for turn";  // stage: idle until the launcher's Turn
inline constexpr const char* kSend = "send";               // ring send (copy in)
inline constexpr const char* kReceive = "receive";         // ring receive (wait + view)
inline constexpr const char* kOptimizerStep = "optimizer step";
// stage: its next micro-batches loaded while it waits for its turn
inline constexpr const char* kLoadAhead = "load ahead";
// stage: summing its gradients with its copies in the other replicas
inline constexpr const char* kReplicaExchange = "replica exchange";
inline constexpr const char* kCheckpoint = "checkpoint";
// stage: its training state moved off its device after a turn, back before one
inline constexpr const char* kPark = "park";
inline constexpr const char* kUnpark = "unpark";
// stage: the optimizer's state back on its device for the step
inline constexpr const char* kUnparkOptimizer = "unpark optimizer";
}  // namespace trace_event

// CLOCK_MONOTONIC in microseconds.
int64_t MonotonicMicros();

// Starts writing this process's events to `part_path` under `process_name`.
// RuntimeError when the file cannot be created.
void StartTracing(const std::string& part_path, const std::string& process_name);
// Flushes and closes the part file (also done at process exit).
void StopTracing();
bool TracingOn();

// One complete event; `category` groups events ("compute", "transfer", ...).
void TraceComplete(const std::string& name, const char* category, int64_t start_us, int64_t end_us);

// A complete event from construction to destruction.
class TraceSpan {
 public:
  TraceSpan(std::string name, const char* category);
  ~TraceSpan();
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;

 private:
  std::string name_;
  const char* category_;
  int64_t start_us_ = -1;  // -1: tracing was off at construction
};

// Writes {"traceEvents":[...]} to `out` from the part files that exist, then
// removes them. RuntimeError when `out` cannot be written.
void MergeTraceParts(const std::vector<std::string>& parts, const std::string& out);

}  // namespace up
