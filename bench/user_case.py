#!/usr/bin/env python3
"""The user's case measured for real: brats16g (standing in for nnU-Net's
ResEnc L plan until the nnunet model kind exists) trained two steps at its
full 192x192x96 patch, one sample per micro-batch, on this machine's CPU,
each way of training in turn; each run's peak tensor bytes (summary.json)
next to what `plan` predicted from its small probes (bench/results/plan-*.json).

usage: user_case.py BIN OUT_JSON [PRECISION...]   (default: fp32)
UP_USER_CASE_WAYS=name,name,... runs only those ways.
A run takes minutes on 2 cores; bench/run-all.sh calls this.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

PARK = ["--set", "pipeline.park=always"]
RECOMPUTE = ["--set", "pipeline.activations=recompute"] + PARK
BLOCKS = ["--set", "pipeline.recompute_unit=block"]
WAYS = [  # keep last: its two processes hold the most of this machine's memory
    ("single-process", ["--single-process"]),
    ("single-process checkpointing", ["--single-process", "--set", "train.checkpointing=levels"]),
    ("single-process checkpointing blocks",
     ["--single-process", "--set", "train.checkpointing=blocks"]),
    ("single-process offload",
     ["--single-process", "--set", "train.checkpointing=blocks", "--set", "train.offload=on"]),
    ("pipeline recompute", RECOMPUTE),
    ("pipeline recompute blocks", RECOMPUTE + BLOCKS),
    ("pipeline offload", RECOMPUTE + BLOCKS + ["--set", "pipeline.offload=on"]),
    ("pipeline keep", ["--set", "pipeline.activations=keep"] + PARK),
]
COMMON = ["--set", "train.steps=2", "--set", "train.warmup_steps=0", "--set", "checkpoint.every=0",
          "--set", "train.micro_batches=2", "--set", "train.threads=2",
          "--set", "pipeline.stages.encoder.device=cpu", "--set", "pipeline.stages.decoder.device=cpu",
          # A turn at the full patch takes minutes on 2 cores (the decoder's two
          # forward-backwards recomputed and offloaded: over 120 s, the default).
          "--set", "pipeline.timeout_s=3600"]


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    binary, out_path = sys.argv[1], sys.argv[2]
    precisions = sys.argv[3:] or ["fp32"]
    rows = []
    tmp = tempfile.mkdtemp(prefix="up-user-case-")
    try:
        for precision in precisions:
            only = os.environ.get("UP_USER_CASE_WAYS")
            for way, args in WAYS:
                if only and way not in only.split(","):
                    continue
                run = os.path.join(tmp, f"{precision}-{way.replace(' ', '-')}")
                cmd = [binary, "train", "-q", "--config", "configs/brats16g.yaml", "--out", run,
                       "--set", f"train.precision={precision}"] + COMMON + args
                print(f"user case: {precision} {way}", file=sys.stderr, flush=True)
                t0 = time.time()
                # glibc's own trimming, so a parked stage's freed blocks leave
                # its RSS (the machine, not the budget, is the limit here).
                env = dict(os.environ, UP_GLIBC_MALLOC_DEFAULTS="1")
                done = subprocess.run(cmd, env=env, capture_output=True, text=True)
                if done.returncode != 0:
                    last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
                    print(f"user case: {precision} {way} failed: {last}", file=sys.stderr)
                    rows.append({"precision": precision, "way": way, "error": last})
                    shutil.rmtree(run, ignore_errors=True)
                    continue
                s = json.load(open(os.path.join(run, "summary.json")))
                steps = [json.loads(l) for l in open(os.path.join(run, "metrics.jsonl"))]
                rows.append({
                    "precision": precision, "way": way,
                    "peak_device_tensor_bytes": s["peak_device_tensor_bytes"]["cpu"],
                    "peak_tensor_bytes": s["peak_tensor_bytes"],
                    "step_s": steps[-1]["step_s"], "wall_s": round(time.time() - t0, 1),
                })
                shutil.rmtree(run)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    with open(out_path, "w") as f:
        json.dump({"bench": "user-case", "config": "configs/brats16g.yaml", "patch": [192, 192, 96],
                   "micro_batches": 2, "batch_size": 2, "rows": rows}, f)


if __name__ == "__main__":
    main()
