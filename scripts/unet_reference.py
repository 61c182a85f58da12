#!/usr/bin/env python3
"""A plain PyTorch U-Net whose state dict names match `unet-pipeline export`.

Load an exported model (see docs/EXPORT.md):

    import torch
    from unet_reference import UNet
    model = UNet(dims=2, in_channels=4, num_classes=3, features=[8, 16, 32, 64], norm="batch")
    model.load_state_dict(torch.load("model.pt", weights_only=True))
    model.eval()
    logits = model(torch.rand(1, 4, 64, 64))  # (N, num_classes, H, W)

Run as a script, it checks an export:
    python scripts/unet_reference.py model.pt [--norm batch|group|instance] [--groups G]
                                              [--expect io.pt] [--atol A]
It infers dims, channels, classes and widths from the tensors, loads them with
strict=True and, with --expect (a dict holding "input" and "logits"), compares
the forward pass with the expected logits.
"""
import argparse
import sys
from collections import OrderedDict

import torch
from torch import nn


def _conv(dims):
    return nn.Conv2d if dims == 2 else nn.Conv3d


def _norm(dims, norm, groups, channels):
    if norm == "batch":
        return (nn.BatchNorm2d if dims == 2 else nn.BatchNorm3d)(channels)
    if norm == "group":
        return nn.GroupNorm(groups, channels)
    return (nn.InstanceNorm2d if dims == 2 else nn.InstanceNorm3d)(channels, affine=True)


def double_conv(dims, norm, groups, cin, cout):
    """[3x3 conv (no bias), norm, ReLU] x 2."""
    conv = _conv(dims)
    return nn.Sequential(OrderedDict([
        ("conv1", conv(cin, cout, 3, padding=1, bias=False)),
        ("norm1", _norm(dims, norm, groups, cout)),
        ("relu1", nn.ReLU(inplace=True)),
        ("conv2", conv(cout, cout, 3, padding=1, bias=False)),
        ("norm2", _norm(dims, norm, groups, cout)),
        ("relu2", nn.ReLU(inplace=True)),
    ]))


class Encoder(nn.Module):
    """down0..down{L-1} (each output is a skip, then 2x max-pool), bottleneck."""

    def __init__(self, dims, in_channels, features, norm, groups):
        super().__init__()
        self.dims = dims
        cin = in_channels
        for i, f in enumerate(features):
            self.add_module(f"down{i}", double_conv(dims, norm, groups, cin, f))
            cin = f
        self.bottleneck = double_conv(dims, norm, groups, cin, 2 * cin)
        self.levels = len(features)

    def forward(self, x):  # x: (N, C, *S)
        pool = nn.functional.max_pool2d if self.dims == 2 else nn.functional.max_pool3d
        skips = []
        for i in range(self.levels):
            x = getattr(self, f"down{i}")(x)  # (N, F[i], S / 2^i)
            skips.append(x)
            x = pool(x, 2)
        return self.bottleneck(x), skips  # (N, 2F[L-1], S / 2^L)


class Decoder(nn.Module):
    """up{i} (2x2 stride-2 transposed conv), concat [skip, up], conv{i}; 1x1 head."""

    def __init__(self, dims, num_classes, features, norm, groups):
        super().__init__()
        up = nn.ConvTranspose2d if dims == 2 else nn.ConvTranspose3d
        cin = 2 * features[-1]
        for i in reversed(range(len(features))):
            self.add_module(f"up{i}", up(cin, features[i], 2, stride=2))
            self.add_module(f"conv{i}", double_conv(dims, norm, groups, 2 * features[i], features[i]))
            cin = features[i]
        self.head = _conv(dims)(features[0], num_classes, 1)
        self.levels = len(features)

    def forward(self, bottleneck, skips):
        x = bottleneck
        for i in reversed(range(self.levels)):
            x = getattr(self, f"up{i}")(x)
            x = getattr(self, f"conv{i}")(torch.cat([skips[i], x], 1))
        return self.head(x)  # (N, num_classes, *S)


class UNet(nn.Module):
    def __init__(self, dims, in_channels, num_classes, features, norm="batch", groups=8):
        super().__init__()
        self.encoder = Encoder(dims, in_channels, features, norm, groups)
        self.decoder = Decoder(dims, num_classes, features, norm, groups)

    def forward(self, x):
        return self.decoder(*self.encoder(x))


def unet_from_state_dict(state, norm=None, groups=8):
    """The UNet an exported state dict fits; norm is read from it when batch."""
    first = state["encoder.down0.conv1.weight"]  # (F0, C, k, k[, k])
    features = []
    while f"encoder.down{len(features)}.conv1.weight" in state:
        features.append(state[f"encoder.down{len(features)}.conv1.weight"].shape[0])
    if norm is None:
        norm = "batch" if "encoder.down0.norm1.running_mean" in state else "instance"
    return UNet(dims=first.dim() - 2, in_channels=first.shape[1],
                num_classes=state["decoder.head.weight"].shape[0], features=features,
                norm=norm, groups=groups)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model")
    parser.add_argument("--norm", choices=["batch", "group", "instance"])
    parser.add_argument("--groups", type=int, default=8)
    parser.add_argument("--expect", help="a .pt dict with 'input' and 'logits'")
    parser.add_argument("--atol", type=float, default=1e-4)
    args = parser.parse_args()

    state = torch.load(args.model, weights_only=True)
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        sys.exit(f"{args.model}: not a dict of tensors")
    model = unet_from_state_dict(state, args.norm, args.groups)
    model.load_state_dict(state, strict=True)
    model.eval()
    print(f"loaded {len(state)} tensors with strict=True")
    if args.expect:
        io = torch.load(args.expect, weights_only=True)
        with torch.no_grad():
            logits = model(io["input"])
        diff = (logits - io["logits"]).abs().max().item()
        if logits.shape != io["logits"].shape or diff > args.atol:
            sys.exit(f"logits differ: shape {tuple(logits.shape)} vs {tuple(io['logits'].shape)}, "
                     f"max |diff| {diff:.3g} > {args.atol}")
        print(f"logits match: max |diff| {diff:.3g}")


if __name__ == "__main__":
    main()
