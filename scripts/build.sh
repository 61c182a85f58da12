#!/usr/bin/env bash
# Configures and builds unet-pipeline (Release) into build/ (or $UP_BUILD_DIR).
# Extra arguments go to cmake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${UP_BUILD_DIR:-build}"
JOBS="${UP_JOBS:-$(nproc)}"
# Ninja when it is there (install-deps installs it) and the folder is new; a
# folder configured earlier keeps its generator. One generator everywhere also
# lets ccache reuse a build in another clone (its paths are relative to the
# folder the compiler runs in, which Make and Ninja choose differently).
GENERATOR=()
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ] && command -v ninja >/dev/null; then
  GENERATOR=(-G Ninja)
fi
cmake -S . -B "$BUILD_DIR" "${GENERATOR[@]}" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS"
