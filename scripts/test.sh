#!/usr/bin/env bash
# Installs what is missing, builds, runs every test with ctest, then the
# quality gates (scripts/quality.sh: sanitizers and fuzzing of the torch-free
# libraries; skip them with UP_SKIP_QUALITY=1).
# Extra arguments go to ctest (e.g. -L unit, -R Ring).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
(cd "${UP_BUILD_DIR:-build}" && ctest --output-on-failure -j "${UP_JOBS:-$(nproc)}" "$@")
if [ "${UP_SKIP_QUALITY:-0}" != "1" ]; then
  scripts/quality.sh
fi
