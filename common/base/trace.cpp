// See trace.h.
#include "common/base/trace.h"

#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>

#include "common/base/errors.h"
#include "common/base/fs_util.h"
#include "common/base/json_writer.h"

namespace up {
namespace {

struct Tracer {
  std::mutex mu;
  std::FILE* file = nullptr;
  int64_t pid = 0;
  ~Tracer() {
    if (file) std::fclose(file);
  }
};

Tracer& TheTracer() {
  static Tracer tracer;
  return tracer;
}

void WriteLine(Tracer& t, const std::string& line) {
  std::fputs(line.c_str(), t.file);
  std::fputc('\n', t.file);
}

}  // namespace

int64_t MonotonicMicros() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

void StartTracing(const std::string& part_path, const std::string& process_name) {
  Tracer& t = TheTracer();
  std::lock_guard<std::mutex> lock(t.mu);
  if (t.file) std::fclose(t.file);
  t.file = std::fopen(part_path.c_str(), "w");
  if (!t.file) throw RuntimeError("cannot write the trace file '" + part_path + "'");
  t.pid = getpid();
  for (const char* kind : {"process_name", "thread_name"}) {
    JsonWriter args, event;
    args.Field("name", process_name);
    event.Field("name", kind)
        .Field("ph", "M")
        .Field("pid", t.pid)
        .Field("tid", t.pid)
        .Raw("args", args.str());
    WriteLine(t, event.str());
  }
}

void StopTracing() {
  Tracer& t = TheTracer();
  std::lock_guard<std::mutex> lock(t.mu);
  if (t.file) std::fclose(t.file);
  t.file = nullptr;
}

bool TracingOn() { return TheTracer().file != nullptr; }

void TraceComplete(const std::string& name, const char* category, int64_t start_us,
                   int64_t end_us) {
  Tracer& t = TheTracer();
  std::lock_guard<std::mutex> lock(t.mu);
  if (!t.file) return;
  JsonWriter event;
  event.Field("name", name)
      .Field("cat", category)
      .Field("ph", "X")
      .Field("ts", start_us)
      .Field("dur", end_us - start_us)
      .Field("pid", t.pid)
      .Field("tid", t.pid);
  WriteLine(t, event.str());
}

TraceSpan::TraceSpan(std::string name, const char* category)
    : name_(std::move(name)), category_(category) {
  if (TracingOn()) start_us_ = MonotonicMicros();
}

TraceSpan::~TraceSpan() {
  if (start_us_ >= 0) TraceComplete(name_, category_, start_us_, MonotonicMicros());
}

void MergeTraceParts(const std::vector<std::string>& parts, const std::string& out) {
  std::string body;
  for (const std::string& part : parts) {
    std::ifstream in(part);
    if (!in) continue;
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      body += (body.empty() ? "\n" : ",\n") + line;
    }
  }
  WriteFileAtomic(out, "{\"traceEvents\":[" + body + "\n]}\n");
  for (const std::string& part : parts) std::remove(part.c_str());
}

}  // namespace up
