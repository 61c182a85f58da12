#!/usr/bin/env python3
"""Export a PyTorch U-Net as a unet-pipeline TorchScript bundle (model.kind: torchscript).

The command over unet_pipeline.export (python/unet_pipeline/export.py), which
holds the cutting itself and documents the bundle:

    python scripts/export_unet.py monai.networks.nets:DynUNet \\
        --kwargs '{"spatial_dims": 3, "in_channels": 4, "out_channels": 3, ...}' \\
        --example 1x4x64x64x64 --out bundle/ [--state-dict weights.pt] [--seed 0]

From Python with scripts/ on sys.path, `from export_unet import export_unet`
still works; with the package installed (`pip install -e .`), use
`from unet_pipeline.export import export_unet`.
"""
import os
import sys

sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

from unet_pipeline.export import FORMAT, VERSION, export_unet, main  # noqa: E402,F401

if __name__ == "__main__":
    main()
