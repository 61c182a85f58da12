// See test_hooks.h.
#include "common/base/test_hooks.h"

#include <algorithm>
#include <cctype>

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <vector>

namespace up {
namespace {

struct Hook {
  const char* var = nullptr;
  int signal = 0;
  std::string who, point;
  int64_t step = 0;  // 0: any
};

const std::vector<std::string> kStagePoints = {"start",    "hello", "turn", "forward",
                                               "backward", "step",  "save", "finish"};
const std::vector<std::string> kLauncherPoints = {"spawn", "turn", "save", "finish"};

[[noreturn]] void BadHook(const char* var, const std::string& value, const std::string& why) {
  std::fprintf(stderr,
               "error: %s=%s is not a valid test hook: %s; use <who>:<point>[:<step>] with who "
               "encoder|decoder|launcher, or a part's key as encoder2, in replica 1 decoder.r1 "
               "(see common/base/test_hooks.h)\n",
               var, value.c_str(), why.c_str());
  std::_Exit(2);
}

std::vector<Hook> ParseHooks() {
  std::vector<Hook> hooks;
  const std::pair<const char*, int> vars[] = {{"UP_TEST_KILL_AT", SIGKILL},
                                              {"UP_TEST_HANG_AT", SIGSTOP}};
  for (const auto& [var, sig] : vars) {
    const char* raw = std::getenv(var);
    if (!raw || !*raw) continue;
    const std::string value = raw;
    std::vector<std::string> parts;
    size_t begin = 0;
    for (size_t end; (end = value.find(':', begin)) != std::string::npos; begin = end + 1)
      parts.push_back(value.substr(begin, end - begin));
    parts.push_back(value.substr(begin));
    if (parts.size() < 2 || parts.size() > 3) BadHook(var, value, "expected 2 or 3 fields");
    Hook h{var, sig, parts[0], parts[1], 0};
    if (!IsTestHookPoint(h.who, h.point)) BadHook(var, value, "unknown who or point");
    if (parts.size() == 3) {
      char* end = nullptr;
      h.step = std::strtoll(parts[2].c_str(), &end, 10);
      if (parts[2].empty() || *end != '\0' || h.step < 1) BadHook(var, value, "step must be >= 1");
    }
    hooks.push_back(h);
  }
  return hooks;
}

const std::vector<Hook>& Hooks() {
  static const std::vector<Hook> hooks = ParseHooks();
  return hooks;
}

}  // namespace

bool IsTestHookPoint(const std::string& who, const std::string& point) {
  const std::vector<std::string>* points = nullptr;
  // A stage by its key: encoder, decoder, or a part of one (encoder2,
  // decoder3), in another replica with ".r<N>" (decoder.r1, encoder2.r3).
  const size_t dot = who.find(".r");
  const std::string stage = who.substr(0, dot);
  const bool replica_ok =
      dot == std::string::npos ||
      (dot + 2 < who.size() &&
       std::all_of(who.begin() + static_cast<std::ptrdiff_t>(dot + 2), who.end(),
                   [](unsigned char c) { return std::isdigit(c) != 0; }));
  for (const std::string half : {"encoder", "decoder"}) {
    if (replica_ok && stage.rfind(half, 0) == 0 &&
        std::all_of(stage.begin() + static_cast<std::ptrdiff_t>(half.size()), stage.end(),
                    [](unsigned char c) { return std::isdigit(c) != 0; }))
      points = &kStagePoints;
  }
  if (who == "launcher") points = &kLauncherPoints;
  if (!points) return false;
  for (const std::string& p : *points) {
    if (p == point) return true;
  }
  return false;
}

void TestHookPoint(const std::string& who, const char* point, int64_t step) {
  for (const Hook& h : Hooks()) {
    if (h.who != who || h.point != point || (h.step != 0 && h.step != step)) continue;
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    const long long us = static_cast<long long>(now.tv_sec) * 1000000 + now.tv_nsec / 1000;
    std::fprintf(stderr, "TEST HOOK %s: %s raises %s at %s of step %lld (monotonic_us=%lld)\n",
                 h.var, who.c_str(), h.signal == SIGKILL ? "SIGKILL" : "SIGSTOP", point,
                 static_cast<long long>(step), us);
    std::fflush(stderr);
    raise(h.signal);
  }
}

}  // namespace up
