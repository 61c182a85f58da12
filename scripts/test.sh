#!/usr/bin/env bash
# Installs what is missing, builds, runs every test with ctest, then the GPU
# check's rehearsal on this CPU machine (scripts/gpu-check.sh rehearse: the
# build from the .debs alone, in a mount namespace hiding the system's
# libraries; skip it with UP_SKIP_REHEARSE=1), then the quality gates
# (scripts/quality.sh: sanitizers and fuzzing of the torch-free libraries;
# skip them with UP_SKIP_QUALITY=1).
# Extra arguments go to ctest (e.g. -L unit, -R Ring).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# Everything, tests included (a warning in the project's own code fails it:
# UP_WERROR, on with Debian 12's compiler).
scripts/build.sh
(cd "${UP_BUILD_DIR:-build}" && ctest --output-on-failure -j "${UP_JOBS:-$(nproc)}" "$@")
if [ "${UP_SKIP_REHEARSE:-0}" != "1" ]; then
  scripts/gpu-check.sh rehearse
fi
if [ "${UP_SKIP_QUALITY:-0}" != "1" ]; then
  scripts/quality.sh
fi
