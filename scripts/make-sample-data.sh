#!/usr/bin/env bash
# Writes a small sample dataset into DIR (default ./sample-data):
#   DIR/images/*.png, DIR/masks/*.png   48 4-channel 64x64 images with 3-class masks
#   DIR/brats/caseNN/...                4 small BraTS-layout NIfTI cases
#   DIR/nnunet/{dataset.json,imagesTr,labelsTr}  the same cases in nnU-Net's raw layout
# Builds unet-pipeline first when it is missing (scripts/build.sh).
#   scripts/make-sample-data.sh sample-data
#   build/bin/unet-pipeline train --config configs/tiny.yaml \
#       --set data.kind=folder --set data.path=sample-data
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DIR="${1:-sample-data}"
BIN="${UP_BUILD_DIR:-$ROOT/build}/bin/unet-pipeline"
[ -x "$BIN" ] || "$ROOT/scripts/build.sh"
exec "$BIN" make-sample-data "$DIR" "${@:2}"
