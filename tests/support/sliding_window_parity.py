#!/usr/bin/env python3
"""`unet-pipeline predict`'s whole-image logits against MONAI's sliding window.

    sliding_window_parity.py MODEL.pt LOGITS.pt --roi 32 32 32 [--overlap 0.5]
        [--sw-batch-size N] [--mirror] [--mode gaussian] [--atol 1e-4]

MODEL.pt is `unet-pipeline export`'s state dict (loaded into
scripts/unet_reference.py's UNet, strict=True, eval mode); LOGITS.pt is
predict's --save-logits file: "input" (C, *S) as the network saw it and
"logits" (K, *S) as predict blended them. MONAI's
`sliding_window_inference` runs the same network over the same input with
the same window, overlap and blending; with --mirror its predictor is the mean
over every flip of the spatial axes, as nnU-Net's test-time mirroring.
Exit 0 and "logits match" when max |ours - MONAI's| <= atol.
"""
import argparse
import itertools
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from unet_reference import unet_from_state_dict  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("logits")
    parser.add_argument("--roi", type=int, nargs="+", required=True)
    parser.add_argument("--overlap", type=float, default=0.5)
    parser.add_argument("--sw-batch-size", type=int, default=1)
    parser.add_argument("--mode", default="gaussian")
    parser.add_argument("--mirror", action="store_true")
    parser.add_argument("--atol", type=float, default=1e-4)
    args = parser.parse_args()

    from monai.inferers import sliding_window_inference

    torch.set_num_threads(1)
    state = torch.load(args.model, weights_only=True)
    model = unet_from_state_dict(state)
    model.load_state_dict(state, strict=True)
    model.eval()
    saved = torch.load(args.logits, weights_only=True)
    image = saved["input"][None]  # (1, C, *S)
    dims = image.dim() - 2

    def predictor(x):
        if not args.mirror:
            return model(x)
        flips = [list(c) for r in range(dims + 1) for c in itertools.combinations(range(2, 2 + dims), r)]
        return sum(model(x.flip(f)).flip(f) if f else model(x) for f in flips) / len(flips)

    with torch.no_grad():
        theirs = sliding_window_inference(image, tuple(args.roi), args.sw_batch_size, predictor,
                                          overlap=args.overlap, mode=args.mode)[0]
    theirs = torch.as_tensor(theirs)
    ours = saved["logits"]
    if ours.shape != theirs.shape:
        sys.exit(f"shapes differ: ours {tuple(ours.shape)}, MONAI's {tuple(theirs.shape)}")
    diff = (ours - theirs).abs().max().item()
    scale = theirs.abs().max().item()
    if not diff <= args.atol:
        sys.exit(f"logits differ: max |diff| {diff:.3g} > {args.atol} (max |logit| {scale:.3g})")
    print(f"logits match: max |diff| {diff:.3g} over {tuple(ours.shape)} (max |logit| {scale:.3g})")


if __name__ == "__main__":
    main()
