#!/usr/bin/env bash
# Makes nnU-Net's preprocessed sample dataset for the tests (ctest fixture
# nnunet_data): scripts/nnunet_sample_dataset.py's 6 CT-like cases as
# dataset 1 and again, with region labels, as dataset 2, then nnU-Net's own
# `nnUNetv2_plan_and_preprocess -d 1 2 -c 2d 3d_fullres` (nnunetv2 from
# .venv; one fingerprint worker: the default eight take longer to start than
# these small cases take); about 50 s on 2 cores.
#   make_nnunet_preprocessed.sh OUT    ->  OUT/raw, OUT/preprocessed, OUT/ready
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
OUT="$1"
PY="$ROOT/.venv/bin/python"
rm -rf "$OUT"
mkdir -p "$OUT/raw" "$OUT/preprocessed"
"$PY" "$ROOT/scripts/nnunet_sample_dataset.py" "$OUT/raw" --id 1 --name Sample --cases 6 >/dev/null
"$PY" "$ROOT/scripts/nnunet_sample_dataset.py" "$OUT/raw" --id 2 --name SampleRegions --cases 6 \
  --regions >/dev/null
export nnUNet_raw="$OUT/raw" nnUNet_preprocessed="$OUT/preprocessed" nnUNet_results="$OUT/results"
"$ROOT/.venv/bin/nnUNetv2_plan_and_preprocess" -d 1 2 -c 2d 3d_fullres -np 1 -npfp 1 \
  >"$OUT/preprocess.log" 2>&1 || { tail -5 "$OUT/preprocess.log" >&2; exit 1; }
touch "$OUT/ready"
echo "nnU-Net's preprocessed sample dataset in $OUT/preprocessed"
