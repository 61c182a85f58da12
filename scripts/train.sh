#!/usr/bin/env bash
# Quick start: installs what is missing, builds, then trains.
#   scripts/train.sh                      # configs/tiny.yaml, end to end
#   scripts/train.sh --config configs/tiny3d.yaml --single-process
# Arguments go to `unet-pipeline train`; without --config/--resume, tiny is used.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
args=("$@")
if ! printf '%s\n' "${args[@]}" | grep -qE '^--(config|resume)'; then
  args=(--config configs/tiny.yaml "${args[@]}")
fi
exec "${UP_BUILD_DIR:-build}/bin/unet-pipeline" train "${args[@]}"
