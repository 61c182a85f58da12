// Test hooks that end or freeze a process at a named point, so the tests can
// show that a crash or a hang anywhere is reported, cleaned up and resumable.
// Never set them outside tests.
//
//   UP_TEST_KILL_AT=<who>:<point>[:<step>]   the process raises SIGKILL on itself
//   UP_TEST_HANG_AT=<who>:<point>[:<step>]   the process raises SIGSTOP on itself
//
// <who> is encoder, decoder or launcher, or a part's key (encoder2, decoder3),
// in a replica other than 0 with its number (decoder.r1, encoder2.r3); <step> is 1-based
// (the step the launcher's messages name) and, when given, must match; without it the first time
// the point is reached counts. Points (kTestHookPoints):
//   stages:   start (arguments read, before connecting), hello (after the
//             handshake and any --load), turn (a Turn received: the stage holds
//             its device), forward (encoder: boundary computed, before sending;
//             decoder: loss computed), backward (encoder: gradients received;
//             decoder: backward done, before sending the gradients), step
//             (before the optimizer step), save (stage file written and synced,
//             before answering Saved), finish (Finish received, before Bye)
//   launcher: spawn (stages started, before the handshake), turn (a Turn sent),
//             save (both stages answered Saved, before the manifest is
//             committed), finish (Finish sent to both stages)
// Before raising, the process writes one line to stderr:
//   "TEST HOOK UP_TEST_KILL_AT: encoder raises SIGKILL at forward of step 3 (monotonic_us=N)"
// (N on CLOCK_MONOTONIC, so a test can measure how fast the loss is noticed).
// A malformed value or an unknown point is reported once and the process exits 2.
//
// Thread-safe: the environment is parsed once.
#pragma once

#include <cstdint>
#include <string>

namespace up {

// The points a hook may name, for `who` ("encoder", "decoder", a part's key
// such as "decoder2", or "launcher").
bool IsTestHookPoint(const std::string& who, const std::string& point);

// Raises the hook's signal if UP_TEST_KILL_AT or UP_TEST_HANG_AT names this
// `who`, `point` and (1-based) `step`; `step` 0 means the point has none.
void TestHookPoint(const std::string& who, const char* point, int64_t step = 0);

}  // namespace up
