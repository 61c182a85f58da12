// See trace_breakdown.h. Reads only complete ("ph":"X") events and only the
// fields it needs, each event on its own line as common/base/trace.cpp writes them.
#include "bench/trace_breakdown.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <vector>

#include "common/base/errors.h"

namespace up::bench {
namespace {

struct Event {
  std::string name, cat;
  int64_t pid = 0, ts = 0, dur = 0;
  bool Contains(const Event& o) const {
    return o.pid == pid && o.ts >= ts && o.ts + o.dur <= ts + dur;
  }
};

// The string value of "key":"..." on `line` ("" when absent).
std::string StringField(const std::string& line, const std::string& key) {
  const std::string open = "\"" + key + "\":\"";
  const size_t at = line.find(open);
  if (at == std::string::npos) return "";
  const size_t begin = at + open.size();
  const size_t end = line.find('"', begin);
  return end == std::string::npos ? "" : line.substr(begin, end - begin);
}

// The integer value of "key":N on `line` (-1 when absent).
int64_t IntField(const std::string& line, const std::string& key) {
  const std::string open = "\"" + key + "\":";
  const size_t at = line.find(open);
  if (at == std::string::npos) return -1;
  return std::strtoll(line.c_str() + at + open.size(), nullptr, 10);
}

// N from a launcher turn's name "turn held: ... of step N" (-1 otherwise).
int64_t StepOfTurn(const std::string& name) {
  const std::string mark = " of step ";
  const size_t at = name.rfind(mark);
  if (name.rfind("turn held", 0) != 0 || at == std::string::npos) return -1;
  return std::strtoll(name.c_str() + at + mark.size(), nullptr, 10);
}

// The complete events and the process names of a trace file.
struct Trace {
  std::vector<Event> events;
  std::vector<std::pair<int64_t, std::string>> processes;  // (pid, name), in order
};

Trace ReadTrace(const std::string& trace_path) {
  std::ifstream in(trace_path);
  if (!in) throw RuntimeError("bench: cannot read the trace " + trace_path);
  Trace t;
  for (std::string line; std::getline(in, line);) {
    if (line.find("\"ph\":\"M\"") != std::string::npos &&
        StringField(line, "name") == "process_name") {
      const size_t args = line.find("\"args\":");
      if (args != std::string::npos)
        t.processes.emplace_back(IntField(line, "pid"), StringField(line.substr(args), "name"));
      continue;
    }
    if (line.find("\"ph\":\"X\"") == std::string::npos) continue;
    t.events.push_back({StringField(line, "name"), StringField(line, "cat"), IntField(line, "pid"),
                        IntField(line, "ts"), IntField(line, "dur")});
  }
  return t;
}

// The window of the steps after `warmup`: from the first turn of step
// warmup+1 to the end of the last turn.
struct Window {
  int64_t from = std::numeric_limits<int64_t>::max(), to = 0, steps = 0;
  double turn_us = 0;
};

Window StepWindow(const Trace& t, const std::string& trace_path, int64_t warmup) {
  Window w;
  int64_t last_step = 0;
  for (const Event& e : t.events) {
    const int64_t step = StepOfTurn(e.name);
    if (step <= warmup) continue;
    w.from = std::min(w.from, e.ts);
    w.to = std::max(w.to, e.ts + e.dur);
    last_step = std::max(last_step, step);
    w.turn_us += e.dur;
  }
  if (last_step == 0) {
    throw RuntimeError("bench: the trace " + trace_path + " holds no turn after step " +
                       std::to_string(warmup));
  }
  w.steps = last_step - warmup;
  return w;
}

// Compute and transfer time inside the window (of process `pid`, or all when
// -1); compute less the transfers inside it, counted once.
std::pair<double, double> Busy(const Trace& t, const Window& w, int64_t pid) {
  std::vector<const Event*> compute, transfer;
  for (const Event& e : t.events) {
    if (e.ts < w.from || e.ts + e.dur > w.to || (pid >= 0 && e.pid != pid)) continue;
    if (e.cat == "compute") compute.push_back(&e);
    if (e.cat == "transfer") transfer.push_back(&e);
  }
  double compute_us = 0, transfer_us = 0;
  for (const Event* c : compute) compute_us += c->dur;
  for (const Event* x : transfer) {
    transfer_us += x->dur;
    // A stage sends and receives inside its forward/backward span: count once.
    if (std::any_of(compute.begin(), compute.end(),
                    [&](const Event* c) { return c->Contains(*x); }))
      compute_us -= x->dur;
  }
  return {compute_us, transfer_us};
}

}  // namespace

StepBreakdown BreakdownFromTrace(const std::string& trace_path, int64_t warmup) {
  const Trace t = ReadTrace(trace_path);
  const Window w = StepWindow(t, trace_path, warmup);
  const auto [compute_us, transfer_us] = Busy(t, w, -1);
  StepBreakdown b;
  b.steps = w.steps;
  b.turn_ms = w.turn_us / 1e3 / b.steps;
  b.compute_ms = compute_us / 1e3 / b.steps;
  b.transfer_ms = transfer_us / 1e3 / b.steps;
  return b;
}

StagesBreakdown StagesFromTrace(const std::string& trace_path, int64_t warmup) {
  const Trace t = ReadTrace(trace_path);
  const Window w = StepWindow(t, trace_path, warmup);
  StagesBreakdown b;
  b.steps = w.steps;
  b.wall_ms = static_cast<double>(w.to - w.from) / 1e3 / b.steps;
  const std::string suffix = "_proc";
  for (const auto& [pid, name] : t.processes) {
    if (name.size() <= suffix.size() ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    b.stages.push_back(
        {name.substr(0, name.size() - suffix.size()), Busy(t, w, pid).first / 1e3 / b.steps});
  }
  return b;
}

std::vector<StageCompute> SpanTimeFromTrace(const std::string& trace_path, int64_t warmup,
                                            const std::string& name) {
  const Trace t = ReadTrace(trace_path);
  const Window w = StepWindow(t, trace_path, warmup);
  const std::string suffix = "_proc";
  std::vector<StageCompute> out;
  for (const auto& [pid, process] : t.processes) {
    if (process.size() <= suffix.size() ||
        process.compare(process.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    double us = 0;
    for (const Event& e : t.events) {
      if (e.pid == pid && e.name == name && e.ts >= w.from && e.ts + e.dur <= w.to) us += e.dur;
    }
    out.push_back({process.substr(0, process.size() - suffix.size()), us / 1e3 / w.steps});
  }
  return out;
}

}  // namespace up::bench
