#!/usr/bin/env bash
# Configures and builds unet-pipeline (Release) into build/ (or $UP_BUILD_DIR).
# Extra arguments go to cmake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${UP_BUILD_DIR:-build}"
JOBS="${UP_JOBS:-$(nproc)}"
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS"
