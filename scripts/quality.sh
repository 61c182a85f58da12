#!/usr/bin/env bash
# Quality gates on the torch-free libraries (common/'s torch-free rooms, up_ipc,
# up_launcher_core)
# and their tests, built with clang apart from the main build (no LibTorch, a
# few minutes):
#   1. AddressSanitizer + UndefinedBehaviorSanitizer: core_test (child
#      processes too), ipc_test and launcher_core_test (device lock,
#      schedules, placement);
#   2. libFuzzer: wire_fuzz, ring_header_fuzz, config_fuzz, manifest_fuzz,
#      each from the seeds in fuzz/corpus/ with a fixed seed (UP_FUZZ_SEED,
#      default 1), for at most UP_FUZZ_SECONDS (default 20). A fixed seed and a
#      fresh work folder make the gate repeatable: each run tries the same
#      inputs in the same order (a slower machine, fewer of them), so CI does
#      not fail at random on an input nobody has seen. To explore instead, run
#      e.g. UP_FUZZ_SEED=0 UP_FUZZ_SECONDS=600 scripts/quality.sh (0: libFuzzer
#      picks a seed) and commit what it finds to fuzz/corpus/ with the fix;
#   3. ThreadSanitizer: the ring, control-channel, child-process and
#      device-lock tests.
#   4. a report (not a gate): the longest production files and functions
#      (scripts/size_report.py; the aim is files under ~600 lines and
#      functions under ~150).
# A finding fails the script; libFuzzer leaves the crashing input in
# $UP_QUALITY_DIR/fuzz-artifacts/ (reproduce: <target> <file>).
# Called by scripts/test.sh after the main suite; runs alone too.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${UP_QUALITY_DIR:-build-quality}"
JOBS="${UP_JOBS:-$(nproc)}"
FUZZ_SECONDS="${UP_FUZZ_SECONDS:-20}"
FUZZ_SEED="${UP_FUZZ_SEED:-1}"
# -O1 -g1: the usual sanitizer trade-off (fast enough, line numbers in reports,
# quicker to compile than -O2 -g).
CLANG=(-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=None
       "-DCMAKE_CXX_FLAGS=-O1 -g1" "-DCMAKE_C_FLAGS=-O1 -g1" -DUP_TORCHFREE_ONLY=ON)
start=$SECONDS
step() { echo "quality: $* ($((SECONDS - start)) s)"; }

step "ASan+UBSan build with the fuzz targets"
cmake -S . -B "$OUT/asan" "${CLANG[@]}" -DUP_SANITIZE=address,undefined -DUP_FUZZ=ON >/dev/null
cmake --build "$OUT/asan" -j "$JOBS"
step "ASan+UBSan tests"
(cd "$OUT/asan" && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
   ctest --output-on-failure -j "$JOBS")

mkdir -p "$OUT/fuzz-artifacts"
for target in wire_fuzz ring_header_fuzz config_fuzz manifest_fuzz; do
  step "fuzzing $target for ${FUZZ_SECONDS} s, seed ${FUZZ_SEED}"
  work="$OUT/fuzz-corpus/$target"  # new inputs land here; the committed seeds stay as they are
  rm -rf "$work" && mkdir -p "$work"  # a fresh start: same seed, same inputs
  log="$OUT/fuzz-artifacts/$target.log"
  rc=0
  "$OUT/asan/bin/$target" "$work" "fuzz/corpus/$target" -max_total_time="$FUZZ_SECONDS" -seed="$FUZZ_SEED" \
    -max_len=8192 -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$OUT/fuzz-artifacts/$target-" >"$log" 2>&1 || rc=$?
  grep -E '^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::peak_rss_mb)' "$log" || true
  if [ "$rc" -ne 0 ]; then
    tail -n 60 "$log"
    echo "quality: $target found a problem (exit $rc); the input is in $OUT/fuzz-artifacts/"
    exit 1
  fi
done

step "TSan build"
cmake -S . -B "$OUT/tsan" "${CLANG[@]}" -DUP_SANITIZE=thread >/dev/null
cmake --build "$OUT/tsan" -j "$JOBS" --target ipc_test core_test
step "TSan ring, control-channel, child-process and device-lock tests"
(cd "$OUT/tsan" && TSAN_OPTIONS=halt_on_error=1 ctest --output-on-failure -j "$JOBS" \
   -R '^((ShmRing|ShmSegment|RunId|ControlChannel|Wire|ChildProcess)Test|ControlTcp|DeviceLocks|ResolveLock)\.')
step "size report"
python3 scripts/size_report.py
step "all quality gates passed"
