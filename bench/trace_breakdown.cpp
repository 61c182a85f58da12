// See trace_breakdown.h. Reads only complete ("ph":"X") events and only the
// fields it needs, each event on its own line as common/trace.cpp writes them.
#include "bench/trace_breakdown.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <vector>

#include "common/errors.h"

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

}  // namespace

StepBreakdown BreakdownFromTrace(const std::string& trace_path, int64_t warmup) {
  std::ifstream in(trace_path);
  if (!in) throw RuntimeError("bench: cannot read the trace " + trace_path);
  std::vector<Event> events;
  for (std::string line; std::getline(in, line);) {
    if (line.find("\"ph\":\"X\"") == std::string::npos) continue;
    events.push_back({StringField(line, "name"), StringField(line, "cat"), IntField(line, "pid"),
                      IntField(line, "ts"), IntField(line, "dur")});
  }
  // The window: from the first turn of step warmup+1 to the end of the last turn.
  int64_t from = std::numeric_limits<int64_t>::max(), to = 0, last_step = 0;
  double turn_us = 0;
  for (const Event& e : events) {
    const int64_t step = StepOfTurn(e.name);
    if (step <= warmup) continue;
    from = std::min(from, e.ts);
    to = std::max(to, e.ts + e.dur);
    last_step = std::max(last_step, step);
    turn_us += e.dur;
  }
  if (last_step == 0) {
    throw RuntimeError("bench: the trace " + trace_path + " holds no turn after step " +
                       std::to_string(warmup));
  }
  std::vector<const Event*> compute, transfer;
  for (const Event& e : events) {
    if (e.ts < from || e.ts + e.dur > to) continue;
    if (e.cat == "compute") compute.push_back(&e);
    if (e.cat == "transfer") transfer.push_back(&e);
  }
  double compute_us = 0, transfer_us = 0;
  for (const Event* c : compute) compute_us += c->dur;
  for (const Event* t : transfer) {
    transfer_us += t->dur;
    // A stage sends and receives inside its forward/backward span: count once.
    if (std::any_of(compute.begin(), compute.end(),
                    [&](const Event* c) { return c->Contains(*t); }))
      compute_us -= t->dur;
  }
  StepBreakdown b;
  b.steps = last_step - warmup;
  b.turn_ms = turn_us / 1e3 / b.steps;
  b.compute_ms = compute_us / 1e3 / b.steps;
  b.transfer_ms = transfer_us / 1e3 / b.steps;
  return b;
}

}  // namespace up::bench
