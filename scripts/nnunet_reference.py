#!/usr/bin/env python3
"""nnU-Net's own network for a plan, loaded with an `unet-pipeline export`.

A model trained with `model.kind: nnunet` exports a state dict under
dynamic_network_architectures' names, aliases included, so the reference
class built from the same plan loads it with strict=True:

    import sys; sys.path.insert(0, "scripts")
    import torch
    from nnunet_reference import network_from_plans
    net = network_from_plans("plans.json", "3d_fullres", in_channels=4, num_classes=4)
    net.load_state_dict(torch.load("model.pt", weights_only=True))

`network_from_architecture(arch, ...)` takes the `architecture` mapping itself
(as `unet-pipeline export` writes it beside the state dict, FILE.architecture.json).

Run as a script it checks an export:
    python scripts/nnunet_reference.py model.pt (--plans P --configuration C | --architecture A)
        --in-channels C --num-classes K [--deep-supervision] [--expect io.pt] [--tolerance T]
With --expect (a dict of "input" and "output0".."outputN") it runs the network
in train mode without gradients and compares every output with the expected
one: max |a - b| <= T * max(1, max |b|).
"""
import argparse
import json
import pydoc
import sys

import torch


def network_from_architecture(architecture, in_channels, num_classes, deep_supervision=False):
    """The network as nnU-Net builds it (get_network_from_plans), initialised its way."""
    kwargs = dict(architecture["arch_kwargs"])
    for key in architecture.get("_kw_requires_import", []):
        if kwargs.get(key) is not None:
            kwargs[key] = pydoc.locate(kwargs[key])
    cls = pydoc.locate(architecture["network_class_name"])
    if cls is None:
        raise SystemExit("cannot import " + architecture["network_class_name"])
    net = cls(input_channels=in_channels, num_classes=num_classes,
              deep_supervision=deep_supervision, **kwargs)
    if hasattr(net, "initialize"):
        net.apply(net.initialize)
    return net


def network_from_plans(plans_path, configuration, in_channels, num_classes,
                       deep_supervision=False):
    with open(plans_path) as f:
        plans = json.load(f)
    configs = plans["configurations"]
    config = configs[configuration]
    while "architecture" not in config and "inherits_from" in config:
        config = configs[config["inherits_from"]]
    return network_from_architecture(config["architecture"], in_channels, num_classes,
                                     deep_supervision)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("state", help="an `unet-pipeline export` .pt")
    p.add_argument("--plans")
    p.add_argument("--configuration")
    p.add_argument("--architecture", help="a JSON file holding the architecture mapping")
    p.add_argument("--in-channels", type=int, required=True)
    p.add_argument("--num-classes", type=int, required=True)
    p.add_argument("--deep-supervision", action="store_true")
    p.add_argument("--expect")
    p.add_argument("--tolerance", type=float, default=1e-5)
    args = p.parse_args()

    if args.architecture:
        with open(args.architecture) as f:
            arch = json.load(f)
        net = network_from_architecture(arch.get("architecture", arch), args.in_channels,
                                        args.num_classes, args.deep_supervision)
    elif args.plans and args.configuration:
        net = network_from_plans(args.plans, args.configuration, args.in_channels,
                                 args.num_classes, args.deep_supervision)
    else:
        p.error("give --plans and --configuration, or --architecture")

    state = torch.load(args.state, weights_only=True)
    net.load_state_dict(state, strict=True)  # raises on a missing or unexpected key
    params = sum(t.numel() for t in net.parameters())
    print(f"loaded {len(state)} tensors with strict=True into "
          f"{type(net).__name__} ({params} parameters)")
    if not args.expect:
        return 0

    io = torch.load(args.expect, weights_only=True)
    net.train()  # batch statistics, as in training; no running-stat update matters here
    with torch.no_grad():
        outputs = net(io["input"])
    if not isinstance(outputs, (list, tuple)):
        outputs = [outputs]
    expected = [io[f"output{i}"] for i in range(len(io) - 1)]
    if len(outputs) != len(expected):
        print(f"FAIL: {len(outputs)} outputs, expected {len(expected)}")
        return 1
    worst = 0.0
    for i, (got, want) in enumerate(zip(outputs, expected)):
        if got.shape != want.shape:
            print(f"FAIL: output{i} has shape {tuple(got.shape)}, expected {tuple(want.shape)}")
            return 1
        err = (got - want).abs().max().item() / max(1.0, want.abs().max().item())
        worst = max(worst, err)
        if err > args.tolerance:
            print(f"FAIL: output{i} {tuple(got.shape)} differs by {err:.3g} (> {args.tolerance})")
            return 1
    print(f"outputs match: {len(outputs)} outputs, worst relative difference {worst:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
