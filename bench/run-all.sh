#!/usr/bin/env bash
# Builds unet-pipeline, runs the benches on the standard configs, keeps their
# JSON in bench/results/ (each stamped by bench/stamp.py with the commit, date
# and command) and regenerates docs/BENCHMARKS.md and README's ways table.
# The user cases at the full patch take most of its time (hours on 2 cores);
# the rest, under half an hour. Environment:
#   UP_BUILD_DIR      build folder (default build)
#   BENCH_MAX_BYTES   largest transport message (default 268435456)
#   BENCH_ROUNDS      runs per step-bench row (default 5 for tiny, 3 for small)
#   BENCH_SKIP_BUILD  set to 1 to use the binary already built
#
# Not run here; each BENCHMARKS.md section says so, and its result file holds
# the exact commands (bench/results/NAME.json, "provenance"):
#   eager-nnunet, eager-torchscript  need dynamic_network_architectures, MONAI
#                                    and exported bundles in .venv (minutes each)
#   nnunet-e2e                       scripts/nnunet-e2e.sh /tmp/nnunet-e2e 1, and
#                                    scripts/nnunet-e2e.sh /tmp/e2e2d 1 2d
#                                    (about 10 and 4 minutes, nnunetv2 in .venv)
#   stages-small-cuts                bench stages --layouts 1+1,1+2 with and
#                                    without pipeline.balance=time (about 5 min)
#   budget-tiny-small                small at 216 MiB (about half an hour)
#   quick-start                      a cold build from a fresh copy (an hour)
#   *-a0b2ee5, *-280062b, *-history, notes-*: measured at older commits or by
#                                    hand; kept as the docs reported them
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${UP_BUILD_DIR:-build}"
ROUNDS="${BENCH_ROUNDS:-3}"
TINY_ROUNDS="${BENCH_ROUNDS:-5}"
MAX_BYTES="${BENCH_MAX_BYTES:-268435456}"
if [[ "${BENCH_SKIP_BUILD:-0}" != 1 ]]; then scripts/build.sh; fi
BIN="$BUILD_DIR/bin/unet-pipeline"
OUT=bench/results
mkdir -p "$OUT"

# keep NAME COMMAND: stamp $OUT/NAME.json.tmp with its command and move it in place.
keep() {
  python3 bench/stamp.py "$OUT/$1.json.tmp" --command "$2"
  mv "$OUT/$1.json.tmp" "$OUT/$1.json"
}

# run NAME ARGS...: one bench, its JSON into $OUT/NAME.json (replaced only on success).
run() {
  local name=$1
  shift
  echo "== bench $* ($name)" >&2
  "$BIN" bench "$@" --json >"$OUT/$name.json.tmp"
  keep "$name" "unet-pipeline bench $* --json"
}

run transport transport --max-bytes "$MAX_BYTES"
# The offload rows at 14 MiB, where each way runs the fewest micro-batches that fit (BENCHMARKS.md).
run step-tiny step --config configs/tiny.yaml --steps 12 --rounds "$TINY_ROUNDS" --warmup 2 --budget 14MiB
# small as the speed targets are set: 2 threads, batch 8 in one micro-batch.
run step-small step --config configs/small.yaml --steps 6 --rounds "$ROUNDS" --warmup 2 \
  --set train.threads=2 --set train.micro_batches=1
# Lean blocks against the blocks as written, three ways, at a 3-D size whose
# steps take seconds (about 12 minutes).
run step-brats16g-lean step --only lean --config configs/brats16g.yaml \
  --set "data.size=[64,64,32]" --set train.micro_batches=2 --set train.threads=2 \
  --set train.warmup_steps=0 --steps 4 --warmup 1 --rounds 3
# 2, 3 and 4 stages under each schedule (one traced run a row).
run stages-tiny stages --config configs/tiny.yaml --set train.micro_batches=4
run stages-small stages --config configs/small.yaml --set train.micro_batches=4 --steps 5
# Copies of the pipeline: each stage's gradient exchange beside Gloo's all_reduce.
run replicas-tiny replicas --config configs/tiny.yaml
run memory-small memory --config configs/small.yaml --steps 3
# The same with one micro-batch in flight, to separate that effect (docs say why).
run memory-small-mb1 memory --config configs/small.yaml --steps 3 --set train.micro_batches=1
# And with the encoder's activations recomputed instead of kept.
run memory-small-recompute memory --config configs/small.yaml --steps 3 --set pipeline.activations=recompute
# The user's case: brats16g's measured plan against 16 GiB (a minute or two each).
plan() {
  local name=$1
  shift
  echo "== plan $* ($name)" >&2
  "$BIN" plan --config configs/brats16g.yaml --gpu-mem 16GiB --json "$@" >"$OUT/$name.json.tmp"
  keep "$name" "${ONEDNN_MAX_CPU_ISA:+ONEDNN_MAX_CPU_ISA=$ONEDNN_MAX_CPU_ISA }unet-pipeline plan --config configs/brats16g.yaml --gpu-mem 16GiB --json $*"
}
plan plan-brats16g
plan plan-brats16g-mb1 --set train.micro_batches=2
plan plan-brats16g-bf16-mb1 --set train.micro_batches=2 --set train.precision=bf16
# And trained for real at the full patch (fp32; several minutes a run on 2 cores).
echo "== user case (bench/user_case.py)" >&2
python3 bench/user_case.py "$BIN" "$OUT/user-case.json.tmp" fp32
keep user-case "python3 bench/user_case.py $BIN OUT.json fp32"
# On an AVX-512 CPU, oneDNN's convolutions copy a block's input into their own
# layout for the weights' gradient, a full-resolution tensor more at the block
# ways' peaks: the same plan and runs with oneDNN held to AVX2 show the bytes
# without it (BENCHMARKS.md, the user's case).
# Without AVX-512 the committed AVX2 files stay (they name their machine).
if grep -qw avx512f /proc/cpuinfo; then
  ONEDNN_MAX_CPU_ISA=AVX2 plan plan-brats16g-mb1-avx2 --set train.micro_batches=2
  echo "== user case, oneDNN held to AVX2" >&2
  ONEDNN_MAX_CPU_ISA=AVX2 python3 bench/user_case.py "$BIN" "$OUT/user-case-avx2.json.tmp" fp32
  ONEDNN_MAX_CPU_ISA=AVX2 keep user-case-avx2 "ONEDNN_MAX_CPU_ISA=AVX2 python3 bench/user_case.py $BIN OUT.json fp32"
fi
# nnU-Net's ResEnc L plan: its measured plan (about 24 minutes on 2 cores) and
# the pipeline's offload way trained for real at the full patch (about 13).
echo "== plan ResEnc L (plan-resenc-l)" >&2
"$BIN" plan --config configs/nnunet-resenc-l.yaml --gpu-mem 16GiB --json >"$OUT/plan-resenc-l.json.tmp"
keep plan-resenc-l "unet-pipeline plan --config configs/nnunet-resenc-l.yaml --gpu-mem 16GiB --json"
echo "== user case ResEnc L (bench/user_case.py --case resenc-l)" >&2
UP_USER_CASE_WAYS="pipeline offload" python3 bench/user_case.py --case resenc-l "$BIN" \
  "$OUT/user-case-resenc-l.json.tmp" fp32
keep user-case-resenc-l "UP_USER_CASE_WAYS=\"pipeline offload\" python3 bench/user_case.py --case resenc-l $BIN OUT.json fp32"
# A whole BraTS volume (240x240x160, 2 micro-batches of one volume): plan's
# table against 16 GiB (about 7 minutes on 2 cores). Its real step is not run
# here: on this machine's CPU (no AVX-512), oneDNN computes the decoder's 64-to-32
# weight gradient at that size with its reference kernel (one step took over
# 25 minutes and was stopped); the command,
# for a machine that can: UP_USER_CASE_WAYS=WAY python3 bench/user_case.py
# --case brats-whole BIN OUT.json fp32.
plan plan-brats-whole --set train.micro_batches=2 --set "data.size=[240,240,160]"
# The largest model (and patch) each way of training fits in one budget.
run capacity-tiny capacity --config configs/tiny.yaml --budget 24MiB
run capacity-tiny-patch capacity --config configs/tiny.yaml --budget 24MiB --scale patch
run capacity-tiny3d capacity --config configs/tiny3d.yaml --budget 48MiB
# tiny3d by patch at one sample per micro-batch (batch 2 in 2), where the
# activations outgrow the CPU convolution's column buffer (BENCHMARKS.md says why).
run capacity-tiny3d-patch capacity --config configs/tiny3d.yaml --budget 512MiB --scale patch \
  --set train.batch_size=2 --set train.micro_batches=2
# The same for the best ways and their lean twins (model.memory: lean).
run capacity-tiny3d-patch-lean capacity --config configs/tiny3d.yaml --budget 512MiB --scale patch \
  --set train.batch_size=2 --set train.micro_batches=2 \
  --way "single-process" --way "single-process, lean" \
  --way "single-process, offload, mb of 1" --way "single-process, offload, mb of 1, lean" \
  --way "pipeline offload+park, mb of 1" --way "pipeline offload+park, mb of 1, lean"
python3 bench/report.py "$OUT" docs/BENCHMARKS.md --readme README.md
echo "wrote docs/BENCHMARKS.md and README.md's ways table" >&2
