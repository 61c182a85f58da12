#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test with ctest.
# Extra arguments go to ctest (e.g. -L unit, -R Ring).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
cd "${UP_BUILD_DIR:-build}"
ctest --output-on-failure -j "${UP_JOBS:-$(nproc)}" "$@"
