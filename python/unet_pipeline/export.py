"""Cuts a PyTorch U-Net into a unet-pipeline TorchScript bundle (model.kind: torchscript).

A bundle is a folder with one TorchScript file per level of the U-Net and a
manifest.json that lists them:

    encoder levels  x -> x; level i's output is skip i; the last is the bottleneck
    decoder levels  (x, skip i) -> x, deepest first
    heads           x at decoder level i -> logits at that resolution

with, for the example input, every level's input and output shapes, and for
every parameter and buffer its key(s) in the user's original model, so that
`unet-pipeline export` writes a state dict the unsplit model loads with
strict=True. unet_pipeline.train and plan cut the model with it; so does the
command scripts/export_unet.py (main() below).

    from unet_pipeline.export import export_unet
    export_unet(model, "bundle/", torch.zeros(1, 4, 64, 64, 64))

recognises MONAI's DynUNet and BasicUNet, dynamic_network_architectures'
PlainConvUNet and ResidualEncoderUNet, and scripts/unet_reference.py's UNet.
Any other U-Net is given as its levels:

    export_unet(down=[...], bottleneck=..., up=[...], head=..., out_dir=..., example=...,
                model=net)   # model (optional): where the parameters' keys come from

`up` is deepest first; each of its modules is called as up_i(x, skip). Each
level is scripted (torch.jit.script); one that cannot be is traced, with a
warning saying what tracing loses.

As a command:

    python scripts/export_unet.py monai.networks.nets:DynUNet \\
        --kwargs '{"spatial_dims": 3, "in_channels": 4, "out_channels": 3, ...}' \\
        --example 1x4x64x64x64 --out bundle/ [--state-dict weights.pt] [--seed 0]
"""
import argparse
import hashlib
import importlib
import json
import os
import sys
import warnings

import torch
from torch import nn

FORMAT = "unet-pipeline-torchscript"
VERSION = 1


class _Chain(nn.Module):
    """Modules applied one after another (x -> x)."""

    def __init__(self, parts):
        super().__init__()
        self.parts = nn.ModuleList(parts)

    def forward(self, x):
        for part in self.parts:
            x = part(x)
        return x


class _UpCat(nn.Module):
    """up(x), concatenated with the skip (skip first or second), then conv."""

    skip_first: bool

    def __init__(self, up, conv, skip_first):
        super().__init__()
        self.up = up
        self.conv = conv
        self.skip_first = skip_first

    def forward(self, x, skip):
        u = self.up(x)
        if self.skip_first:
            return self.conv(torch.cat([skip, u], 1))
        return self.conv(torch.cat([u, skip], 1))


def _is(model, module_prefix, names):
    cls = type(model)
    return cls.__module__.startswith(module_prefix) and cls.__name__ in names


def _levels_of(model):
    """(down, bottleneck, up deepest first, {level: head}) of a known U-Net."""
    if _is(model, "monai.", ("DynUNet",)):
        down = [model.input_block, *model.downsamples]
        heads = {0: model.output_block}
        if model.deep_supervision:
            for i, h in enumerate(model.deep_supervision_heads):
                heads[i + 1] = h
        return down, model.bottleneck, list(model.upsamples), heads
    if _is(model, "monai.", ("BasicUNet", "BasicUnet", "Basicunet")):
        down = [model.conv_0, model.down_1, model.down_2, model.down_3]
        up = [model.upcat_4, model.upcat_3, model.upcat_2, model.upcat_1]
        return down, model.down_4, up, {0: model.final_conv}
    if _is(model, "dynamic_network_architectures.", ("PlainConvUNet", "ResidualEncoderUNet")):
        enc, dec = model.encoder, model.decoder
        stages = list(enc.stages)
        if getattr(enc, "stem", None) is not None:
            stages[0] = _Chain([enc.stem, stages[0]])
        levels = len(stages) - 1
        up = [_UpCat(dec.transpconvs[s], dec.stages[s], skip_first=False) for s in range(levels)]
        heads = {levels - 1 - s: dec.seg_layers[s] for s in range(levels)}
        return stages[:-1], stages[-1], up, heads
    if type(model).__name__ == "UNet" and hasattr(model, "encoder") and hasattr(model.encoder, "down0"):
        e, d = model.encoder, model.decoder  # scripts/unet_reference.py
        pool = nn.MaxPool2d(2) if e.dims == 2 else nn.MaxPool3d(2)
        down = [e.down0] + [_Chain([pool, getattr(e, f"down{i}")]) for i in range(1, e.levels)]
        up = [_UpCat(getattr(d, f"up{i}"), getattr(d, f"conv{i}"), skip_first=True)
              for i in reversed(range(e.levels))]
        return down, _Chain([pool, e.bottleneck]), up, {0: d.head}
    raise TypeError(
        f"export_unet: {type(model).__module__}.{type(model).__name__} is not a U-Net it knows "
        "(MONAI DynUNet/BasicUNet, dynamic_network_architectures PlainConvUNet/"
        "ResidualEncoderUNet, scripts/unet_reference.py UNet); give its levels instead: "
        "export_unet(down=[...], bottleneck=..., up=[...], head=..., out_dir=..., example=...)")


def _keys_by_tensor(model):
    """id(tensor) -> every key it has in model.state_dict() (duplicates included)."""
    keys = {}
    for name, t in model.named_parameters(remove_duplicate=False):
        keys.setdefault(id(t), []).append(name)
    for name, t in model.named_buffers(remove_duplicate=False):
        keys.setdefault(id(t), []).append(name)
    return keys


def _sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _compile(module, name, inputs):
    """(scripted or traced module, "script" | "trace")."""
    try:
        with warnings.catch_warnings():  # torch.jit's deprecation notice: the bundle needs it
            warnings.simplefilter("ignore", DeprecationWarning)
            return torch.jit.script(module), "script"
    except Exception as e:  # noqa: BLE001 - any scripting failure falls back to tracing
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        warnings.warn(
            f"export_unet: {name} cannot be scripted ({reason}); tracing it instead. A trace "
            "records only the operations the example input ran: branches on values or shapes "
            "are frozen to the example's path, so train only at shapes that take the same path",
            stacklevel=3)
    buffers = [b.detach().clone() for b in module.buffers()]
    was_training = module.training
    module.train()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        traced = torch.jit.trace(module, tuple(inputs), check_trace=False)
    with torch.no_grad():  # the trace's forward must not move BatchNorm statistics
        for b, saved in zip(module.buffers(), buffers):
            b.copy_(saved)
    module.train(was_training)
    return traced, "trace"


def export_unet(model=None, out_dir=None, example=None, *, down=None, bottleneck=None, up=None,
                head=None, heads=None, factory=None, factory_kwargs=None):
    """Writes the bundle of `model` (or of the levels given) to out_dir; returns the manifest.

    example: an input tensor (N, C, *S) the levels run once (in eval mode, no
    gradients) to record every boundary shape. factory ("MODULE:CALLABLE")
    and factory_kwargs, when given, say how the unsplit model is built: the
    manifest keeps them, so that `unet-pipeline bench step` can train the
    model eagerly in Python beside the trainers.
    """
    if out_dir is None or example is None:
        raise TypeError("export_unet needs out_dir and example (an input tensor (N, C, *S))")
    if down is None:
        if model is None:
            raise TypeError("export_unet needs a model, or its levels (down=, bottleneck=, up=, head=)")
        down, bottleneck, up, head_map = _levels_of(model)
        source = f"{type(model).__module__}.{type(model).__name__}"
    else:
        if bottleneck is None or up is None or (head is None and heads is None):
            raise TypeError("export_unet: give down=[...], bottleneck=..., up=[...] and head=...")
        head_map = dict(heads) if heads is not None else {0: head}
        source = f"{type(model).__module__}.{type(model).__name__}" if model is not None else "levels"
    down, up = list(down), list(up)
    if len(up) != len(down):
        raise ValueError(f"export_unet: {len(down)} encoder levels above the bottleneck but "
                         f"{len(up)} decoder levels; a U-Net has one decoder level per skip")
    if 0 not in head_map:
        raise ValueError("export_unet: no head at level 0 (full resolution)")
    example = example.detach().float()
    if example.dim() not in (4, 5):
        raise ValueError(f"export_unet: example must be (N, C, H, W) or (N, C, D, H, W), "
                         f"not {tuple(example.shape)}")

    # Keys in the user's model; for bare levels, by role and position.
    owner = model
    if owner is None:
        owner = nn.Module()
        owner.down = nn.ModuleList(down)
        owner.bottleneck = bottleneck
        owner.up = nn.ModuleList(up)
        owner.heads = nn.ModuleDict({str(k): v for k, v in head_map.items()})
    keys = _keys_by_tensor(owner)

    levels = [m for m in down] + [bottleneck]
    parts = []  # (role, file, module, example inputs, example output, level)
    modes = {}
    for m in [owner] + levels + up + list(head_map.values()):
        modes[id(m)] = m.training
    for m in levels + up + list(head_map.values()):
        m.eval()
    with torch.no_grad():
        x = example
        skips = []
        for i, m in enumerate(levels):
            inputs = [x]
            x = m(x)
            if not isinstance(x, torch.Tensor):
                raise TypeError(f"export_unet: encoder level {i} returns {type(x).__name__}, "
                                "not one tensor")
            parts.append(("encoder", f"encoder{i}.pt", m, inputs, x, i))
            skips.append(x)
        outputs = {}
        for j, m in enumerate(up):
            i = len(up) - 1 - j
            inputs = [x, skips[i]]
            x = m(x, skips[i])
            parts.append(("decoder", f"decoder{i}.pt", m, inputs, x, i))
            if tuple(x.shape[2:]) != tuple(skips[i].shape[2:]):
                raise ValueError(f"export_unet: decoder level {i} returns {tuple(x.shape)}, not "
                                 f"at the resolution of skip {i} {tuple(skips[i].shape)}")
            outputs[i] = x
        for i in sorted(head_map):
            if i not in outputs:
                raise ValueError(f"export_unet: a head at level {i}, but the decoder has levels "
                                 f"0..{len(up) - 1}")
            logits = head_map[i](outputs[i])
            parts.append(("head", f"head{i}.pt", head_map[i], [outputs[i]], logits, i))
    for m in [owner] + levels + up + list(head_map.values()):
        m.train(modes[id(m)])

    os.makedirs(out_dir, exist_ok=True)
    manifest = {"format": FORMAT, "version": VERSION, "source": source,
                "dims": example.dim() - 2, "example": list(example.shape),
                "encoder": [], "decoder": [], "heads": []}
    if factory:
        manifest["factory"] = factory
        manifest["factory_kwargs"] = json.dumps(factory_kwargs or {})
    covered = set()
    for role, file, m, inputs, out, level in parts:
        compiled, method = _compile(m, f"{role} level {level}", inputs)
        path = os.path.join(out_dir, file)
        compiled.save(path)
        state = []
        named = ([(n, t, "parameter") for n, t in m.named_parameters()] +
                 [(n, t, "buffer") for n, t in m.named_buffers()])
        for name, t, kind in named:
            k = keys.get(id(t))
            if not k:
                raise ValueError(f"export_unet: {role} level {level}'s {name} is not in the model's "
                                 "state dict")
            covered.update(k)
            state.append({"name": name, "shape": list(t.shape),
                          "dtype": str(t.dtype).replace("torch.", ""), "kind": kind, "keys": k})
        entry = {"file": file, "bytes": os.path.getsize(path), "sha256": _sha256(path),
                 "method": method, "level": level, "inputs": [list(t.shape) for t in inputs],
                 "output": list(out.shape), "state": state}
        manifest[role if role != "head" else "heads"].append(entry)
    missing = [k for k in owner.state_dict(keep_vars=True) if k not in covered]
    if missing:
        raise ValueError(f"export_unet: {len(missing)} state dict entries are in no level "
                         f"(first: {missing[0]}); give every module the U-Net runs to a level")
    manifest["in_channels"] = int(example.shape[1])
    manifest["num_classes"] = int(manifest["heads"][0]["output"][1])
    tmp = os.path.join(out_dir, "manifest.json.tmp")
    with open(tmp, "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    os.replace(tmp, os.path.join(out_dir, "manifest.json"))
    return manifest


def main():
    """The command scripts/export_unet.py: builds MODULE:CALLABLE(**kwargs), writes its bundle."""
    p = argparse.ArgumentParser(
        prog="export_unet.py",
        description="Write a U-Net as a unet-pipeline TorchScript bundle (model.kind: torchscript).",
        epilog="example: export_unet.py monai.networks.nets:BasicUNet --kwargs "
               "'{\"spatial_dims\": 2, \"in_channels\": 1, \"out_channels\": 2}' "
               "--example 1x1x64x64 --out bundle/")
    p.add_argument("factory", help="MODULE:CALLABLE that builds the model, e.g. "
                                   "monai.networks.nets:DynUNet")
    p.add_argument("--kwargs", default="{}", help="its keyword arguments, as JSON")
    p.add_argument("--state-dict", help="weights to load first (torch.save of a state dict)")
    p.add_argument("--example", required=True, help="the example input's shape, e.g. 1x4x64x64x64")
    p.add_argument("--seed", type=int, default=0, help="torch.manual_seed before building it")
    p.add_argument("--out", required=True, help="the bundle folder to write")
    args = p.parse_args()
    module_name, _, attr = args.factory.partition(":")
    if not attr:
        p.error(f"factory {args.factory!r}: expected MODULE:CALLABLE")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
        kwargs = json.loads(args.kwargs)
        shape = [int(s) for s in args.example.lower().split("x")]
    except (ImportError, AttributeError, ValueError) as e:
        sys.exit(f"export_unet: error: {e}")
    torch.manual_seed(args.seed)
    model = factory(**kwargs)
    if args.state_dict:
        model.load_state_dict(torch.load(args.state_dict, weights_only=True), strict=True)
    manifest = export_unet(model, args.out, torch.zeros(shape), factory=args.factory,
                           factory_kwargs=kwargs)
    files = manifest["encoder"] + manifest["decoder"] + manifest["heads"]
    print(f"wrote {args.out}: {len(files)} levels of {manifest['source']} "
          f"({sum(f['bytes'] for f in files)} bytes), "
          f"{sum(1 for f in files if f['method'] == 'trace')} traced")

