#!/usr/bin/env bash
# Configures and builds unet-pipeline (Release) into build/ (or $UP_BUILD_DIR).
#   scripts/build.sh              # everything, tests included
#   scripts/build.sh --programs   # what training needs: unet-pipeline,
#                                 # encoder_proc, decoder_proc, their libraries
# Other arguments go to cmake's configure step (e.g. -DUP_WERROR=ON).
# Shows the build's own counter, one line a step; the compiler's output goes
# to $BUILD_DIR/build.log, and a failure prints its first errors and that path.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${UP_BUILD_DIR:-build}"
JOBS="${UP_JOBS:-$(nproc)}"
TARGETS=()
CONFIGURE=()
for arg in "$@"; do
  case "$arg" in
    --programs) TARGETS=(--target unet-pipeline encoder_proc decoder_proc) ;;
    *) CONFIGURE+=("$arg") ;;
  esac
done
# Ninja when it is there (install-deps installs it) and the folder is new; a
# folder configured earlier keeps its generator. One generator everywhere also
# lets ccache reuse a build in another clone (its paths are relative to the
# folder the compiler runs in, which Make and Ninja choose differently).
GENERATOR=()
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ] && command -v ninja >/dev/null; then
  GENERATOR=(-G Ninja)
fi
mkdir -p "$BUILD_DIR"
LOG="$BUILD_DIR/build.log"
start=$SECONDS
echo "build: configuring $BUILD_DIR (log: $LOG)"
if ! cmake -S . -B "$BUILD_DIR" "${GENERATOR[@]}" -DCMAKE_BUILD_TYPE=Release \
    "${CONFIGURE[@]}" >"$LOG" 2>&1; then
  grep -m 20 -A 3 "CMake Error" "$LOG" >&2 || tail -n 20 "$LOG" >&2
  echo "build: configuring failed; the whole output is in $LOG" >&2
  exit 1
fi
echo "build: compiling ${TARGETS[*]:-everything} with $JOBS jobs"
# Ninja's counter ("[12/115] Building CXX object common/CMakeFiles/...") is
# shortened to the counter and the file; everything else only goes to the log.
set +e
NINJA_STATUS="[%f/%t] " cmake --build "$BUILD_DIR" -j "$JOBS" "${TARGETS[@]}" 2>&1 |
  tee -a "$LOG" |
  awk '/^\[[0-9]+\/[0-9]+\] / {
         what = $NF; sub(/\.o$/, "", what)
         if (match(what, /[^\/]+\.dir\//)) {  # an object: its target and file
           t = substr(what, RSTART, RLENGTH - 5); what = substr(what, RSTART + RLENGTH)
           sub(/^Unity\/unity_/, "batch ", what); sub(/_cxx\.cxx$/, "", what)
           what = t ": " what
         }
         printf "build: %s %s %s\n", $1, $2, what; fflush(); next }
       /(warning|error):/ { w++ }
       END { if (w) printf "build: %d compiler diagnostics (see the log)\n", w }'
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" != 0 ]; then
  echo "build: failed (exit $rc); the first errors:" >&2
  grep -m 20 -E "error|FAILED" "$LOG" >&2 || tail -n 20 "$LOG" >&2
  echo "build: the whole output is in $LOG" >&2
  exit "$rc"
fi
echo "build: done in $((SECONDS - start)) s"
