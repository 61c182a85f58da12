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
WHAT="everything, tests included"
CONFIGURE=()
for arg in "$@"; do
  case "$arg" in
    --programs)
      TARGETS=(--target unet-pipeline encoder_proc decoder_proc)
      WHAT="the programs (unet-pipeline, encoder_proc, decoder_proc)"
      ;;
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
echo "build: compiling $WHAT with $JOBS jobs (the counter is ninja's: done/total steps)"
# Ninja's counter ("[12/115] Building CXX object common/CMakeFiles/...") is
# shortened to the counter and what it builds; everything else only goes to
# the log. A shell loop, not awk: Debian's mawk reads a pipe in blocks.
progress() {
  local line counter verb what target diagnostics=0
  while IFS= read -r line; do
    if [[ "$line" =~ ^(\[[0-9]+/[0-9]+\])\ ([A-Za-z]+)\ .*\ ([^ ]+)$ ]]; then
      counter="${BASH_REMATCH[1]}" verb="${BASH_REMATCH[2]}" what="${BASH_REMATCH[3]%.o}"
      if [[ "$what" =~ ([^/]+)\.dir/(.*)$ ]]; then  # an object: its target and file
        target="${BASH_REMATCH[1]}"
        what="${BASH_REMATCH[2]}"
        [[ "$what" =~ ^Unity/unity_([0-9]+)_cxx\.cxx$ ]] && what="batch ${BASH_REMATCH[1]}"
        what="$target: $what"
      fi
      echo "build: $counter $verb $what"
    elif [[ "$line" == *"warning:"* || "$line" == *"error:"* ]]; then
      diagnostics=$((diagnostics + 1))
    fi
  done
  if [ "$diagnostics" != 0 ]; then
    echo "build: $diagnostics compiler diagnostics (see $LOG)"
  fi
}
set +e
NINJA_STATUS="[%f/%t] " cmake --build "$BUILD_DIR" -j "$JOBS" "${TARGETS[@]}" 2>&1 |
  tee -a "$LOG" | progress
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" != 0 ]; then
  echo "build: failed (exit $rc); the first errors:" >&2
  grep -m 20 -E "error|FAILED" "$LOG" >&2 || tail -n 20 "$LOG" >&2
  echo "build: the whole output is in $LOG" >&2
  exit "$rc"
fi
echo "build: done in $((SECONDS - start)) s"
