#!/usr/bin/env bash
# nnU-Net's three commands with this project's train in the middle, beside
# nnU-Net's own trainer trained for as many iterations, on a small CT-like
# dataset with anisotropic voxels (scripts/nnunet_sample_dataset.py):
#
#   nnUNetv2_plan_and_preprocess -d 1 -c CONFIGURATION
#   unet-pipeline train (data.kind: nnunet, fold 0)   |  nnUNetv2_train 1 CONFIGURATION 0 -tr nnUNetTrainer_${EPOCHS}epochs
#   nnUNetv2_predict ... -tr nnUNetTrainerUnetPipeline |  nnUNetv2_predict ... -tr nnUNetTrainer_..
#   nnUNetv2_evaluate_simple on fold 0's validation cases, both
#
#   scripts/nnunet-e2e.sh [WORK] [EPOCHS] [CONFIGURATION]
#       (default /tmp/nnunet-e2e, 1 epoch of 250 steps, 3d_fullres; 2d works the same)
# Prints each side's mean Dice and the difference; writes WORK/e2e.json.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="$(realpath -m "${1:-/tmp/nnunet-e2e}")"
EPOCHS="${2:-1}"
CONF="${3:-3d_fullres}"
case "$EPOCHS" in 1) TRAINER=nnUNetTrainer_1epoch ;; *) TRAINER="nnUNetTrainer_${EPOCHS}epochs" ;; esac
BIN="$ROOT/build/bin/unet-pipeline"
VENV="$ROOT/.venv/bin"
[ -x "$BIN" ] || "$ROOT/scripts/build.sh"
rm -rf "$WORK"
mkdir -p "$WORK"
export nnUNet_raw="$WORK/raw" nnUNet_preprocessed="$WORK/preprocessed" nnUNet_results="$WORK/results"
export nnUNet_n_proc_DA="${nnUNet_n_proc_DA:-2}"
log() { echo "[e2e $(date +%T)] $*"; }

log "dataset: 10 cases, 0.8 x 0.8 x 3 mm, CT-like"
"$VENV/python" "$ROOT/scripts/nnunet_sample_dataset.py" "$nnUNet_raw" --cases 10 >/dev/null
log "nnUNetv2_plan_and_preprocess -d 1 -c $CONF"
"$VENV/nnUNetv2_plan_and_preprocess" -d 1 -c "$CONF" -np 2 >"$WORK/preprocess.log" 2>&1

start=$(date +%s)
log "unet-pipeline train: fold 0, $EPOCHS epoch(s) of 250 steps, nnUNetTrainer's recipe"
"$BIN" train --config "$ROOT/configs/nnunet-dataset.yaml" --out "$WORK/run" -q \
  --set data.dataset=1 --set data.configuration="$CONF" --set train.epochs="$EPOCHS" \
  --set validate.every=0 \
  --set checkpoint.every=0 --set train.threads=2
ours_s=$(($(date +%s) - start))

# nnU-Net's commands import every trainer variant, and two network modules
# of dynamic_network_architectures (Primus, Eva) import timm, which .venv
# leaves out (its torchvision would replace the pinned torch). Neither is
# used here: a stand-in whose names are placeholders lets the imports pass.
SHIMS="$WORK/shims"
mkdir -p "$SHIMS/timm/layers" "$SHIMS/timm/models"
stub='def __getattr__(name):  # any name: a placeholder, never called here
    return type(name, (), {})'
echo "" >"$SHIMS/timm/__init__.py"
for f in layers/__init__.py models/__init__.py models/eva.py; do echo "$stub" >"$SHIMS/timm/$f"; done
export PYTHONPATH="$SHIMS${PYTHONPATH:+:$PYTHONPATH}"

start=$(date +%s)
log "nnUNetv2_train 1 $CONF 0 -tr $TRAINER -device cpu"
"$VENV/nnUNetv2_train" 1 "$CONF" 0 -tr "$TRAINER" -device cpu >"$WORK/nnunet-train.log" 2>&1
theirs_s=$(($(date +%s) - start))

# Fold 0's validation cases, raw, for both predictors.
mkdir -p "$WORK/val_images" "$WORK/val_labels"
for c in $("$VENV/python" -c "import json;print(' '.join(json.load(open('$nnUNet_preprocessed/Dataset001_Sample/splits_final.json'))[0]['val']))"); do
  cp "$nnUNet_raw/Dataset001_Sample/imagesTr/${c}_0000.nii.gz" "$WORK/val_images/"
  cp "$nnUNet_raw/Dataset001_Sample/labelsTr/${c}.nii.gz" "$WORK/val_labels/"
done
for tr in nnUNetTrainerUnetPipeline "$TRAINER"; do
  log "nnUNetv2_predict -d 1 -c $CONF -f 0 -tr $tr"
  "$VENV/nnUNetv2_predict" -i "$WORK/val_images" -o "$WORK/pred_$tr" -d 1 -c "$CONF" -f 0 \
    -tr "$tr" -device cpu --disable_progress_bar >"$WORK/predict_$tr.log" 2>&1
  "$VENV/nnUNetv2_evaluate_simple" "$WORK/val_labels" "$WORK/pred_$tr" -l 1 2 \
    -o "$WORK/pred_$tr/summary.json" >/dev/null 2>&1
done
"$VENV/python" - "$WORK" "$TRAINER" "$ours_s" "$theirs_s" "$CONF" <<'PY'
import json, sys
work, trainer, ours_s, theirs_s, conf = sys.argv[1:]
def dice(tr):
    s = json.load(open("%s/pred_%s/summary.json" % (work, tr)))
    return s["foreground_mean"]["Dice"], {k: v["Dice"] for k, v in s["mean"].items()}
ours, ours_cls = dice("nnUNetTrainerUnetPipeline")
theirs, theirs_cls = dice(trainer)
# Each trainer's own end-of-training validation (fold_0/validation/summary.json:
# nnUNetTrainer's perform_actual_validation, and ours through nnU-Net's code).
def validation(tr):
    path = "%s/results/Dataset001_Sample/%s__nnUNetPlans__%s/fold_0/validation/summary.json"
    return json.load(open(path % (work, tr, conf)))["foreground_mean"]["Dice"]
out = {"unet_pipeline": {"dice": ours, "per_label": ours_cls, "train_s": int(ours_s),
                         "validation_dice": validation("nnUNetTrainerUnetPipeline")},
       "nnunet": {"trainer": trainer, "dice": theirs, "per_label": theirs_cls, "train_s": int(theirs_s),
                  "validation_dice": validation(trainer)},
       "difference": ours - theirs}
json.dump(out, open(work + "/e2e.json", "w"), indent=1)
print("mean foreground Dice on fold 0's validation cases: unet-pipeline %.4f (%s s to train), "
      "nnU-Net %s %.4f (%s s); difference %+.4f" % (ours, ours_s, trainer, theirs, theirs_s, ours - theirs))
print("each trainer's own validation folder (nnU-Net's metrics): unet-pipeline %.4f, nnU-Net %.4f"
      % (out["unet_pipeline"]["validation_dice"], out["nnunet"]["validation_dice"]))
PY
