// See stop_signal.h.
#include "launcher/stop_signal.h"

#include <signal.h>

#include <atomic>

namespace up {
namespace {

volatile sig_atomic_t g_first_signal = 0;
volatile sig_atomic_t g_count = 0;
std::atomic<pid_t> g_children[8];
struct sigaction g_old_int, g_old_term;

void OnSignal(int sig) {
  if (g_first_signal == 0) g_first_signal = sig;
  g_count = g_count + 1;
  if (g_count >= 2) {
    for (auto& child : g_children) {
      const pid_t pid = child.load();
      if (pid > 0) kill(pid, SIGKILL);
    }
  }
}

}  // namespace

StopSignals::StopSignals() {
  g_first_signal = 0;
  g_count = 0;
  for (auto& child : g_children) child.store(0);
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, &g_old_int);
  sigaction(SIGTERM, &sa, &g_old_term);
}

StopSignals::~StopSignals() {
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
  for (auto& child : g_children) child.store(0);
}

int StopSignals::requested() { return g_first_signal; }

void StopSignals::WatchChild(pid_t pid) {
  for (auto& child : g_children) {
    pid_t empty = 0;
    if (child.compare_exchange_strong(empty, pid)) return;
  }
}

}  // namespace up
