"""unet-pipeline from Python: your own PyTorch U-Net, trained by the C++ pipeline.

    import unet_pipeline as up
    up.plan(net, example)                                   # each way's peak, the one to use
    net = up.train(net, example, data="sample-data/brats", out="runs/mine", train__steps=60)
    up.predict("runs/mine", "sample-data/brats", "runs/mine/pred")

The package is a layer over the `unet-pipeline` command line, which it builds
in the checkout the first time (docs/PYTHON.md). Settings are config keys
(docs/CONFIG.md) with dots as double underscores; a program's refusal is one
RunError whose message is its `unet-pipeline: error: ...` line.
"""
from .api import Plan, make_sample_data, plan, predict, train
from .programs import RunError


def __getattr__(name):
    """export_unet, imported when first used: it imports torch, which nothing else here needs
    at import time."""
    if name == "export_unet":
        from .export import export_unet  # noqa: PLC0415

        return export_unet
    raise AttributeError(f"module 'unet_pipeline' has no attribute {name!r}")


__all__ = ["Plan", "RunError", "export_unet", "make_sample_data", "plan", "predict", "train"]
