#!/usr/bin/env python3
"""Python eager training of a user's unsplit U-Net, against the project's trainer.

    eager_parity.py export FACTORY --kwargs JSON --seed S --example 1x4x32x32x32 \\
        --bundle DIR --init init.pt
        builds the model (torch.manual_seed(S), FACTORY(**kwargs)), saves its
        initial state dict and writes its bundle with scripts/export_unet.py.

    eager_parity.py train FACTORY --kwargs JSON --init init.pt --batches batches.pt \\
        --steps N --micro-batches M --lr LR --metrics RUN/metrics.jsonl \\
        --trained model.pt [--rtol 1e-5]
        trains the unsplit model eagerly as the single-process trainer does
        (train mode, cross-entropy, Adam, the loss of each micro-batch divided
        by M, one optimizer step per step) on the batches `unet-pipeline
        batches` wrote, then loads the trainer's export (`unet-pipeline
        export`) with strict=True and compares every step's loss and every
        tensor: |ours - theirs| <= rtol * |theirs| (tensors: in norm).
"""
import argparse
import importlib
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from export_unet import export_unet  # noqa: E402


def build(factory, kwargs):
    module_name, _, attr = factory.partition(":")
    return getattr(importlib.import_module(module_name), attr)(**json.loads(kwargs))


def export(args):
    torch.manual_seed(args.seed)
    model = build(args.factory, args.kwargs)
    torch.save(model.state_dict(), args.init)
    shape = [int(s) for s in args.example.split("x")]
    manifest = export_unet(model, args.bundle, torch.zeros(shape))
    print(f"exported {manifest['source']}: {len(manifest['encoder'])} encoder levels")


def rel(a, b):
    return (a - b).norm().item() / max(b.norm().item(), 1e-30)


def train(args):
    model = build(args.factory, args.kwargs)
    model.load_state_dict(torch.load(args.init, weights_only=True), strict=True)
    model.train()
    batches = torch.load(args.batches, weights_only=True)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    losses = []
    for s in range(args.steps):
        opt.zero_grad(set_to_none=True)
        total = 0.0
        for m in range(args.micro_batches):
            logits = model(batches[f"images-s{s}-m{m}"])
            loss = F.cross_entropy(logits, batches[f"masks-s{s}-m{m}"]) / args.micro_batches
            loss.backward()
            total += loss.item()
        opt.step()
        losses.append(total)

    with open(args.metrics) as f:
        theirs = [json.loads(line)["loss"] for line in f if line.strip()]
    if len(theirs) != args.steps:
        sys.exit(f"the trainer logged {len(theirs)} steps, not {args.steps}")
    worst = max(abs(a - b) / abs(b) for a, b in zip(losses, theirs))
    print(f"losses: ours {losses}\nlosses: trainer {theirs}")
    if not worst <= args.rtol:
        sys.exit(f"losses differ: max rel diff {worst:.3g} > {args.rtol}")
    print(f"losses match: {args.steps} steps, max rel diff {worst:.3g}")

    trained = torch.load(args.trained, weights_only=True)
    check = build(args.factory, args.kwargs)
    check.load_state_dict(trained, strict=True)
    print(f"loaded {len(trained)} tensors with strict=True")
    worst, worst_key = 0.0, None
    for key, ours in model.state_dict().items():
        t = trained[key]
        if ours.is_floating_point():
            d = rel(t.double(), ours.double())
        else:
            d = 0.0 if torch.equal(t, ours) else math.inf
        if d > worst:
            worst, worst_key = d, key
    if not worst <= args.rtol:
        sys.exit(f"weights differ: {worst_key} max rel diff {worst:.3g} > {args.rtol}")
    print(f"weights match: {len(trained)} tensors, max rel diff {worst:.3g} ({worst_key})")


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("export")
    t = sub.add_parser("train")
    for q in (e, t):
        q.add_argument("factory")
        q.add_argument("--kwargs", default="{}")
        q.add_argument("--init", required=True)
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("--example", required=True)
    e.add_argument("--bundle", required=True)
    t.add_argument("--batches", required=True)
    t.add_argument("--steps", type=int, required=True)
    t.add_argument("--micro-batches", type=int, required=True)
    t.add_argument("--lr", type=float, required=True)
    t.add_argument("--metrics", required=True)
    t.add_argument("--trained", required=True)
    t.add_argument("--rtol", type=float, default=1e-5)
    args = p.parse_args()
    torch.set_num_threads(1)
    export(args) if args.command == "export" else train(args)


if __name__ == "__main__":
    main()
