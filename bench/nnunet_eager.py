#!/usr/bin/env python3
"""Python eager peer of `unet-pipeline bench step` for a model.kind: nnunet config.

Builds dynamic_network_architectures' network from the same plan (as nnU-Net
does), and trains it the way the project's single-process trainer does on
the same shapes: batch = train.batch_size in train.micro_batches
micro-batches, deep supervision with nnU-Net's weights, CE + nnU-Net's soft
Dice (ce_dice) or CE, Adam or SGD, the same torch threads. Prints the median
step time over the steps after the warm-up, one JSON line.

    .venv/bin/python bench/nnunet_eager.py --plans P --configuration C \\
        --in-channels 2 --num-classes 3 --batch 2 --micro-batches 1 --threads 2 --steps 8
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
from nnunet_reference import network_from_architecture, network_from_plans  # noqa: E402


def soft_dice(logits, target, batch_dice):
    prob = torch.softmax(logits, 1)[:, 1:]
    onehot = F.one_hot(target, logits.shape[1]).movedim(-1, 1).to(prob.dtype)[:, 1:]
    axes = tuple(range(2, logits.dim()))
    inter, pred, gt = (prob * onehot).sum(axes), prob.sum(axes), onehot.sum(axes)
    if batch_dice:
        inter, pred, gt = inter.sum(0), pred.sum(0), gt.sum(0)
    return ((2 * inter + 1e-5) / torch.clamp_min(gt + pred + 1e-5, 1e-8)).mean()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--plans", help="an nnU-Net plans JSON (with --configuration)")
    p.add_argument("--configuration")
    p.add_argument("--architecture", help="instead of --plans: a JSON file holding "
                                          "{\"architecture\": the configuration's architecture}")
    p.add_argument("--in-channels", type=int, required=True)
    p.add_argument("--num-classes", type=int, required=True)
    p.add_argument("--patch", type=int, nargs="*", help="default: the plan's patch_size")
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--micro-batches", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--loss", choices=["ce", "ce_dice"], default="ce_dice")
    p.add_argument("--optimizer", choices=["adam", "sgd"], default="adam")
    p.add_argument("--no-batch-dice", action="store_true")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    if args.architecture:
        with open(args.architecture) as f:
            architecture = json.load(f)["architecture"]
        if not args.patch:
            p.error("--architecture needs --patch")
        patch = args.patch
        net = network_from_architecture(architecture, args.in_channels, args.num_classes,
                                        deep_supervision=True)
    else:
        if not args.plans or not args.configuration:
            p.error("give --plans and --configuration, or --architecture")
        with open(args.plans) as f:
            conf = json.load(f)["configurations"][args.configuration]
        patch = args.patch or conf["patch_size"]
        net = network_from_plans(args.plans, args.configuration, args.in_channels,
                                 args.num_classes, deep_supervision=True)
    net.train()
    outputs = len(net.decoder.stages)
    weights = [1 / 2**i for i in range(outputs)]
    if outputs > 1:
        weights[-1] = 0
    weights = [w / sum(weights) for w in weights]
    opt = (torch.optim.Adam(net.parameters(), lr=1e-3) if args.optimizer == "adam"
           else torch.optim.SGD(net.parameters(), lr=1e-2, momentum=0.99, nesterov=True))
    n = args.batch // args.micro_batches
    images = torch.randn(args.micro_batches, n, args.in_channels, *patch)
    masks = torch.randint(0, args.num_classes, (args.micro_batches, n, *patch))

    times = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        for mb in range(args.micro_batches):
            outs = net(images[mb])
            loss = 0
            for w, out in zip(weights, outs):
                if w == 0:
                    continue
                t = masks[mb]
                for d in range(2, out.dim()):
                    f = t.shape[d - 1] // out.shape[d]
                    if f > 1:
                        t = t[(slice(None),) * (d - 1) + (slice(f // 2, None, f),)]
                term = F.cross_entropy(out, t)
                if args.loss == "ce_dice":
                    term = term - soft_dice(out, t, not args.no_batch_dice)
                loss = loss + w * term
            (loss / args.micro_batches).backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    kept = times[args.warmup:] or times
    for t in kept:
        print(json.dumps({"step_s": t}))
    print(json.dumps({"peer": "python eager (dynamic_network_architectures)",
                      "torch": torch.__version__, "threads": args.threads,
                      "median_step_s": statistics.median(kept), "steps": len(kept)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
