#!/usr/bin/env python3
"""The Python package in a fresh venv trains as the command line does, bit for bit.

usage: package_test.py SOURCE_DIR BUILD_DIR

A venv holding only torch, MONAI and the package's one dependency tqdm (and
wheel, which setuptools 65 builds an editable install with) gets
`pip install -e SOURCE_DIR` with no index. In it, the three lines train a
MONAI DynUNet on the sample cases; the same model (same seed) goes through
scripts/export_unet.py and `unet-pipeline train` on configs/dynunet-brats.yaml
with the same settings. Checked: both runs' param_digest are equal, the module
train() returned holds exactly the command line's exported weights, a fresh
DynUNet loads them with strict=True, and a bad setting is one RunError whose
message is the program's one error line.
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import venvs  # noqa: E402

STEPS = 3
KWARGS = {"spatial_dims": 3, "in_channels": 4, "out_channels": 4, "kernel_size": [3, 3, 3],
          "strides": [1, 2, 2], "upsample_kernel_size": [2, 2], "norm_name": "instance",
          "filters": [4, 8, 16]}

# Run by the fresh venv's Python, in the scratch folder.
PYTHON_SIDE = f"""
import torch, unet_pipeline as up
from monai.networks.nets import DynUNet
torch.manual_seed(0)
net = DynUNet(**{KWARGS!r})
trained = up.train(net, torch.zeros(1, 4, 16, 16, 16), data="sample/brats", out="py",
                   train__steps={STEPS}, train__batch_size=2, progress=False)
assert trained is net
torch.save(net.state_dict(), "py-state.pt")
fresh = DynUNet(**{KWARGS!r})
fresh.load_state_dict(torch.load("py/model.pt", weights_only=True), strict=True)
try:
    up.train(net, (1, 4, 16, 16, 16), data="sample/brats", out="bad", train__steps=0,
             progress=False)
    raise SystemExit("train__steps=0 was not refused")
except up.RunError as e:
    print("RunError:", e)
print("package at", up.__file__)
"""


def fail(what):
    sys.exit(f"package_test: {what}")


def run(command, **kwargs):
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=600, **kwargs)
    if done.returncode != 0:
        fail(f"{' '.join(command[:3])} ... exited {done.returncode}:\n{done.stdout[-4000:]}")
    return done.stdout


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, build = (os.path.abspath(a) for a in sys.argv[1:])
    program = os.path.join(build, "bin", "unet-pipeline")
    with tempfile.TemporaryDirectory() as tmp:
        python = venvs.make_venv(os.path.join(tmp, "env"), ["torch", "monai", "tqdm", "wheel"],
                                 pip=True)
        offline = dict(os.environ, PIP_NO_INDEX="1", PIP_FIND_LINKS="")
        run([python, "-m", "pip", "install", "-q", "--no-build-isolation", "-e", src], env=offline)
        run([program, "make-sample-data", os.path.join(tmp, "sample")])

        # The command line: export_unet.py, then train on the config of docs/OWN-UNET.md.
        run([sys.executable, os.path.join(src, "scripts", "export_unet.py"),
             "monai.networks.nets:DynUNet", "--kwargs", json.dumps(KWARGS), "--seed", "0",
             "--example", "1x4x16x16x16", "--out", os.path.join(tmp, "cli-bundle")])
        run([program, "train", "--config", os.path.join(src, "configs", "dynunet-brats.yaml"),
             "--set", f"model.path={tmp}/cli-bundle", "--set", f"data.path={tmp}/sample/brats",
             "--set", "data.size=16", "--set", f"train.steps={STEPS}", "--out", f"{tmp}/cli"])
        run([program, "export", "--checkpoint", f"{tmp}/cli", "--out", f"{tmp}/cli/model.pt"])

        # The three lines, in the fresh venv, finding the programs in BUILD_DIR.
        env = dict(os.environ, UP_BUILD_DIR=build)
        env.pop("PYTHONPATH", None)
        out = run([python, "-c", PYTHON_SIDE], cwd=tmp, env=env)
        print(out)
        if f"package at {src}/python/unet_pipeline/__init__.py" not in out:
            fail("the fresh venv did not import the package from the checkout (pip install -e)")
        refusal = [l for l in out.splitlines() if l.startswith("RunError:")]
        if refusal != ["RunError: unet-pipeline: error: config: train.steps = 0: must be >= 1"]:
            fail(f"train__steps=0 did not give the program's one error line: {refusal}")

        digests = [json.load(open(f"{tmp}/{run_dir}/summary.json"))["param_digest"]
                   for run_dir in ("cli", "py")]
        print(f"package_test: param_digest command line {digests[0]}, Python {digests[1]}")
        if digests[0] != digests[1]:
            fail("the Python run's param_digest differs from the command line's")
        import torch  # noqa: PLC0415 - the checking side's own torch (.venv)

        cli = torch.load(f"{tmp}/cli/model.pt", weights_only=True)
        py = torch.load(f"{tmp}/py-state.pt", weights_only=True)
        if sorted(cli) != sorted(py):
            fail(f"the returned module's keys differ from the export's: "
                 f"{sorted(set(cli) ^ set(py))[:5]}")
        differ = [k for k in cli if not torch.equal(cli[k], py[k])]
        if differ:
            fail(f"{len(differ)} tensors of the returned module differ from the command line's "
                 f"(first: {differ[0]})")
        print(f"package_test: ok: {len(cli)} tensors equal, one param_digest")


if __name__ == "__main__":
    main()
