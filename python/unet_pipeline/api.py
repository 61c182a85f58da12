"""plan, train and predict: a PyTorch U-Net through the unet-pipeline command line.

Each call cuts the module into a bundle (export.py), writes a config of
`model.kind: torchscript` on it and runs `unet-pipeline plan --json`,
`train` or `predict`; settings go to the command as `--set key=value`
(settings.py). train watches the run's metrics.jsonl for its progress bar and
loads the trained weights back into the module with strict=True (`unet-pipeline
export` writes them under the module's own keys). The run folder keeps the
bundle (bundle/) and the config written (unet_pipeline.yaml) beside the run's
own files, so `predict` and `--resume` find everything in it.
"""
import copy
import html
import json
import os
import shutil
import tempfile
import time

from . import programs, settings as settings_
from .programs import RunError

CONFIG_NAME = "unet_pipeline.yaml"
BUNDLE_NAME = "bundle"

def _example_tensor(example):
    import torch  # noqa: PLC0415 - torch is the caller's; imported when used

    if isinstance(example, torch.Tensor):
        return example
    if isinstance(example, (list, tuple)) and all(isinstance(s, int) for s in example):
        return torch.zeros(tuple(example))
    raise TypeError(f"unet_pipeline: example={example!r}: give an input tensor (N, C, *S) or its "
                    "shape, e.g. (1, 4, 32, 32, 32)")


def _write_model(model, example, folder, data_keys):
    """The bundle of model and a config on it and data_keys ({"data.kind": ...}), in folder;
    the config's path."""
    from .export import export_unet  # noqa: PLC0415 - imports torch

    tensors = list(model.parameters()) + list(model.buffers())
    if any(t.device.type != "cpu" for t in tensors):  # a module on a GPU is cut from a CPU copy
        model = copy.deepcopy(model).cpu()
    bundle = os.path.join(folder, BUNDLE_NAME)
    export_unet(model, bundle, _example_tensor(example).detach().cpu())
    config = {"model": {"kind": "torchscript", "path": os.path.abspath(bundle)}}
    for key, value in data_keys.items():
        config.setdefault("data", {})[key.split(".", 1)[1]] = value
    path = os.path.join(folder, CONFIG_NAME)
    with open(path, "w") as f:
        f.write("# written by unet_pipeline (python/unet_pipeline/api.py); "
                "settings came as --set\n")
        json.dump(config, f, indent=2)  # JSON is YAML
        f.write("\n")
    return path


def _gib(n):
    return f"{n / 2**30:.2f} GiB" if isinstance(n, (int, float)) else "-"


class Plan(dict):
    """`unet-pipeline plan --json`'s report: a dict, shown as its table of ways.

    plan["rows"] holds each way, plan["recommended"] the way to use;
    settings() gives that way as train()'s keyword settings.
    """

    def settings(self):
        pick = self.get("recommended", {})
        out = {"single_process": bool(pick.get("single_process"))}
        for line in pick.get("sets", []):
            key, _, value = line.partition("=")
            out[key] = value
        return out

    def table(self):
        """[(way, needed, fits, host, fits host)] as text."""
        return [(r["name"], _gib(r.get("needed_bytes", r.get("peak_bytes"))),
                 "yes" if r.get("fits") else "no", _gib(r.get("host_bytes")),
                 "yes" if r.get("fits_host", True) else "no") for r in self.get("rows", [])]

    def _recommendation(self):
        pick = self.get("recommended", {})
        return f"recommended: {pick.get('way')}: {pick.get('reason')}"

    def __str__(self):
        head = ("way", "needed", "fits", "host", "fits host")
        rows = [head] + self.table()
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        return "\n".join(lines + [self._recommendation()])

    __repr__ = __str__

    def _repr_html_(self):
        head = ("way", "needed", "fits", "host", "fits host")
        cells = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>"
                        for r in self.table())
        return ("<table><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>" + cells +
                f"</table><p>{html.escape(self._recommendation())}</p>")


def plan(model, example, *, data=None, measure=True, **settings):
    """Each way's peak memory for this model, and the way to use (a Plan).

    gpu_mem="16GiB", headroom="10%", host_mem=..., probe_voxels=N and
    ways=["pipeline offload", ...] (only those ways measured) are plan's own
    options; measure=False skips the probe runs (the estimate alone);
    every other keyword is a config key (settings.py).
    """
    options = settings_.plan_arguments(settings, measure)  # takes plan's own from settings
    data_keys = settings_.data_keys(data)
    folder = tempfile.mkdtemp(prefix="unet-pipeline-plan-")
    try:
        config = _write_model(model, example, folder, data_keys)
        out = programs.run(["plan", "--config", config, "--json"] + options +
                           settings_.set_arguments(settings))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return Plan(json.loads(out))


def _config_steps(run_dir):
    """train.steps from the run's resolved config.yaml, or None before it is written."""
    try:
        with open(os.path.join(run_dir, "config.yaml")) as f:
            in_train = False
            for line in f:
                if not line.startswith(" "):
                    in_train = line.startswith("train:")
                elif in_train and line.strip().startswith("steps:"):
                    return int(line.split(":", 1)[1])
    except (OSError, ValueError):
        pass
    return None


class _MetricsProgress:
    """A tqdm bar fed by the run's metrics.jsonl, one line a finished step."""

    def __init__(self, run_dir, show, total=None):
        self.path = os.path.join(run_dir, "metrics.jsonl")
        self.run_dir = run_dir
        self.offset = 0
        self.partial = ""
        done = self._new_step()  # a resumed run starts at its checkpoint's step
        self.bar = programs.tqdm(desc="train", unit="step", total=total, disable=not show,
                                 initial=done["step"] if done else 0)

    def _new_step(self):
        """The last step metrics.jsonl gained since the last call, or None."""
        try:
            with open(self.path) as f:
                f.seek(self.offset)
                text = f.read()
                self.offset = f.tell()
        except OSError:
            return None
        lines = (self.partial + text).split("\n")
        self.partial = lines.pop()  # a line still being written
        last = None
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if "step" in entry:
                last = entry
        return last

    def __call__(self):
        if self.bar.total is None:
            self.bar.total = _config_steps(self.run_dir)
        last = self._new_step()
        if last:
            self.bar.set_postfix(loss=f"{last['loss']:.4f}", dice=f"{last['dice']:.3f}",
                                 refresh=False)
            self.bar.update(last["step"] - self.bar.n)

    def close(self):
        self.bar.close()


def _default_out(model):
    return os.path.join("runs", f"{type(model).__name__}-{time.strftime('%Y%m%d-%H%M%S')}")


def train(model, example=None, *, data=None, out=None, resume=None, single_process=False,
          progress=True, log=False, **settings):
    """Trains model through unet-pipeline; returns it with the trained weights (strict=True).

    example: an input tensor (N, C, *S) or its shape; its spatial size is the
    default patch (data.size). data: a dataset folder, "synthetic" or a dict
    of data.* keys. out: the run folder (default runs/CLASS-TIME). resume: a
    run folder to continue (its config and bundle; example and data unused).
    single_process=True trains in one process (`--single-process`); every
    other keyword is a config key (train__steps=..., devices=[...],
    **{"pipeline.offload": "on"}). progress shows a bar, log echoes the
    programs' log lines.
    """
    import torch  # noqa: PLC0415

    if resume is not None:
        run_dir = os.fspath(resume)
        args = ["train", "--resume", run_dir]
    else:
        if example is None:
            raise TypeError("unet_pipeline.train needs an example input (a tensor or its shape)")
        run_dir = os.fspath(out) if out is not None else _default_out(model)
        if os.path.exists(os.path.join(run_dir, "config.yaml")):
            raise RunError(f"{programs.ERROR_PREFIX} out={run_dir}: this folder already holds a "
                           f"run; continue it with resume={run_dir!r} or choose another out")
        data_keys = settings_.data_keys(data)
        os.makedirs(run_dir, exist_ok=True)
        config = _write_model(model, example, run_dir, data_keys)
        args = ["train", "--config", config, "--out", run_dir]
    if single_process:
        args.append("--single-process")
    args += settings_.set_arguments(settings)
    steps = dict(settings_.flatten(settings)).get("train.steps")
    bar = _MetricsProgress(run_dir, progress, steps if isinstance(steps, int) else None)
    try:
        programs.run(args, progress=bar, echo=log)
    finally:
        bar.close()
    weights = os.path.join(run_dir, "model.pt")
    programs.run(["export", "--checkpoint", run_dir, "--out", weights])
    model.load_state_dict(torch.load(weights, weights_only=True), strict=True)
    return model


def make_sample_data(out):
    """`unet-pipeline make-sample-data OUT`: PNG pairs (out/images, out/masks), BraTS cases
    (out/brats) and nnU-Net's raw layout (out/nnunet); returns out."""
    programs.run(["make-sample-data", os.fspath(out)])
    return os.fspath(out)


def predict(run, inputs, out, **options):
    """Masks (and overlays, NIfTI) of inputs from a trained run, into out; the files written.

    options are predict's own: mirror=True, overlap=0.5, device="cpu",
    sw_batch_size=N, blend="constant", save_logits=True.
    """
    args = ["predict", "--checkpoint", os.fspath(run), "--input", os.fspath(inputs),
            "--out", os.fspath(out)]
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        if value is True:
            args.append(flag)
        elif value is not False and value is not None:
            args += [flag, str(value)]
    programs.run(args)
    return sorted(os.path.join(out, f) for f in os.listdir(out))
