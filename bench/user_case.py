#!/usr/bin/env python3
"""The user's case measured for real: a case's config trained two steps at
its full patch, one sample per micro-batch, on this machine's CPU, each way of
training in turn; each run's peak tensor bytes (summary.json) next to what
`plan` predicted from its small probes (bench/results/plan-*.json).

usage: user_case.py [--case CASE] BIN OUT_JSON [PRECISION...]   (default: fp32)
CASE is brats16g (the default: the 3-D U-Net at 192x192x96, 2 micro-batches of
one sample), brats16g-lean (the same with model.memory: lean), brats-whole (the same network on a whole BraTS volume, 240x240x160)
brats-whole-lean (the same with model.memory: lean) or resenc-l (nnU-Net's
ResEnc L plan at 160x192x160, its batch of 3 as 3 micro-batches of one volume).
UP_USER_CASE_WAYS=name,name,... runs only those ways; UP_USER_CASE_STEPS=N trains
N steps instead of 2 (1 measures the peak of a case whose step takes many
minutes; step_s is then the first step's).
A run takes minutes on 2 cores (brats16g) or tens of minutes (resenc-l);
bench/run-all.sh calls this.
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
CASES = {
    "brats16g": {"config": "configs/brats16g.yaml", "patch": [192, 192, 96], "batch_size": 2,
                 "micro_batches": 2},
    "resenc-l": {"config": "configs/nnunet-resenc-l.yaml", "patch": [160, 192, 160],
                 "batch_size": 3, "micro_batches": 3},
    # brats16g with model.memory: lean (issue 49's lean blocks).
    "brats16g-lean": {"config": "configs/brats16g.yaml", "patch": [192, 192, 96], "batch_size": 2,
                      "micro_batches": 2, "sets": ["model.memory=lean"]},
    # A whole BraTS volume (240x240x155 padded to a multiple of 16 on its
    # last axis): brats16g's network on it, 2 micro-batches of one volume.
    "brats-whole": {"config": "configs/brats16g.yaml", "patch": [240, 240, 160],
                    "batch_size": 2, "micro_batches": 2,
                    "sets": ["data.size=[240,240,160]"]},
    # The same with model.memory: lean (issue 49's lean blocks).
    "brats-whole-lean": {"config": "configs/brats16g.yaml", "patch": [240, 240, 160],
                         "batch_size": 2, "micro_batches": 2,
                         "sets": ["data.size=[240,240,160]", "model.memory=lean"]},
}
COMMON = ["--set", "train.steps=" + os.environ.get("UP_USER_CASE_STEPS", "2"),
          "--set", "train.warmup_steps=0", "--set", "checkpoint.every=0",
          "--set", "train.threads=2",
          "--set", "pipeline.stages.encoder.device=cpu", "--set", "pipeline.stages.decoder.device=cpu",
          # A turn at the full patch takes minutes on 2 cores (the decoder's two
          # forward-backwards recomputed and offloaded: over 120 s, the default).
          "--set", "pipeline.timeout_s=3600"]


def machine():
    """The CPU the runs had: tensor bytes depend on it (oneDNN picks its
    kernels by CPU), so BENCHMARKS.md says which machine gave each figure.
    The fields of the C++ benches' machine (bench/bench_machine.h) that this
    script can read without LibTorch."""
    model, avx512 = "unknown", False
    with open("/proc/cpuinfo") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key.strip() == "model name" and model == "unknown":
                model = value.strip()
            if key.strip() == "flags":
                avx512 = "avx512f" in value.split()
                break
    out = {"cpu_model": model, "cores": os.cpu_count(), "avx512": avx512,
           "memory_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
           "kernel": f"{os.uname().sysname} {os.uname().release}"}
    # oneDNN's convolutions on AVX-512 copy a block's input into their own
    # layout for the weights' gradient: a limit on its ISA changes the bytes.
    if os.environ.get("ONEDNN_MAX_CPU_ISA"):
        out["onednn_max_cpu_isa"] = os.environ["ONEDNN_MAX_CPU_ISA"]
    return out


def main():
    argv = sys.argv[1:]
    case_name = "brats16g"
    if argv[:1] == ["--case"] and len(argv) > 1:
        case_name, argv = argv[1], argv[2:]
    if case_name not in CASES:
        sys.exit(f"user_case.py: --case {case_name} is not a case; use one of {', '.join(CASES)}")
    if len(argv) < 2:
        sys.exit(__doc__)
    case = CASES[case_name]
    binary, out_path = argv[0], argv[1]
    precisions = argv[2:] or ["fp32"]
    common = COMMON + ["--set", f"train.batch_size={case['batch_size']}",
                       "--set", f"train.micro_batches={case['micro_batches']}"]
    for extra in case.get("sets", []):
        common += ["--set", extra]
    rows = []
    tmp = tempfile.mkdtemp(prefix="up-user-case-")
    try:
        for precision in precisions:
            only = os.environ.get("UP_USER_CASE_WAYS")
            for way, args in WAYS:
                if only and way not in only.split(","):
                    continue
                run = os.path.join(tmp, f"{precision}-{way.replace(' ', '-')}")
                cmd = [binary, "train", "-q", "--config", case["config"], "--out", run,
                       "--set", f"train.precision={precision}"] + common + args
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
                    "peak_rss_bytes": s.get("peak_rss_bytes"),
                    "step_s": steps[-1]["step_s"], "steps": len(steps),
                    "wall_s": round(time.time() - t0, 1),
                })
                shutil.rmtree(run)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    with open(out_path, "w") as f:
        json.dump({"bench": "user-case", "case": case_name, "machine": machine(),
                   "config": case["config"],
                   "patch": case["patch"], "micro_batches": case["micro_batches"],
                   "batch_size": case["batch_size"], "rows": rows}, f)


if __name__ == "__main__":
    main()
