#!/usr/bin/env python3
"""Python eager peer of `unet-pipeline bench step` for a model.kind: torchscript bundle.

Trains the user's unsplit model (FACTORY(**kwargs), as given to
scripts/export_unet.py) the way the single-process trainer does: batch
--batch in --micro-batches micro-batches, cross-entropy, Adam, the same torch
threads, random data made once. Prints the median step time after the
warm-up as one JSON line.

    .venv/bin/python bench/eager_step.py unet_reference:UNet \\
        --kwargs '{"dims": 2, "in_channels": 4, "num_classes": 3, "features": [8, 16, 32, 64]}' \\
        --patch 64 64 --batch 8 --micro-batches 2 --threads 1 --steps 8
"""
import argparse
import importlib
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("factory", help="MODULE:CALLABLE, e.g. monai.networks.nets:DynUNet")
    p.add_argument("--kwargs", default="{}")
    p.add_argument("--patch", type=int, nargs="+", required=True)
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--micro-batches", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--warmup", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    module_name, _, attr = args.factory.partition(":")
    kwargs = json.loads(args.kwargs)
    net = getattr(importlib.import_module(module_name), attr)(**kwargs)
    net.train()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    n = args.batch // args.micro_batches
    in_channels = next(net.parameters()).shape[1]
    images = torch.randn(args.micro_batches, n, in_channels, *args.patch)
    with torch.no_grad():
        classes = net(images[0]).shape[1]
    masks = torch.randint(0, classes, (args.micro_batches, n, *args.patch))
    times = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        for mb in range(args.micro_batches):
            loss = F.cross_entropy(net(images[mb]), masks[mb]) / args.micro_batches
            loss.backward()
            loss.item()
        opt.step()
        times.append(time.perf_counter() - t0)
    for t in times[args.warmup:]:
        print(json.dumps({"step_s": t}))
    print(json.dumps({"peer": "python eager", "factory": args.factory, "torch": torch.__version__,
                      "median_step_s": statistics.median(times[args.warmup:])}))


if __name__ == "__main__":
    main()
