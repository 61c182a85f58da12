#!/usr/bin/env bash
# Quick start: installs what training needs, builds the three programs
# (unet-pipeline, encoder_proc, decoder_proc; scripts/test.sh builds the
# rest), then trains on whatever device the machine has (devices: auto).
#   scripts/train.sh                      # configs/tiny.yaml, end to end
#   scripts/train.sh --config configs/tiny3d.yaml --single-process
# Arguments go to `unet-pipeline train`; without --config/--resume, tiny is used.
# A torch 2.11 or newer that python3 (or UP_PYTHON=...) already imports is
# built against as it is: install-deps makes .venv see it, downloading none.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --train
scripts/build.sh --programs
args=("$@")
if ! printf '%s\n' "${args[@]}" | grep -qE '^--(config|resume)'; then
  args=(--config configs/tiny.yaml "${args[@]}")
fi
exec "${UP_BUILD_DIR:-build}/bin/unet-pipeline" train "${args[@]}"
