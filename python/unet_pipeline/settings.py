"""Python keyword settings as the command line's `--set key=value` overrides.

A setting's name is its config key (docs/CONFIG.md), with dots written as
double underscores (`train__steps=2`), given as is (`**{"train.steps": 2}`)
or as nested dicts (`train={"steps": 2}`); `devices` is `pipeline.devices`.
Values become YAML flow text, which is what `--set` reads: a list
`[cuda:0, cuda:1]`, a bool `true`, None `null`. Whether a key exists and its
value is right is the program's to say (its one error line names both).
"""
import json
import os
import re

# Keyword names that stand for a config key of another name.
ALIASES = {"devices": "pipeline.devices"}

# A string YAML reads back as the same string without quotes.
_PLAIN = re.compile(r"^[A-Za-z0-9_./+-][A-Za-z0-9_./+ :-]*$")


def config_key(name):
    """`train__steps` -> `train.steps`; `devices` -> `pipeline.devices`."""
    name = ALIASES.get(name, name)
    return name.replace("__", ".")


def flatten(settings):
    """{name: value} with nested dicts opened -> [(config key, value)], in order."""
    flat = []
    for name, value in settings.items():
        key = config_key(name)
        if isinstance(value, dict):
            flat.extend((f"{key}.{k}", v) for k, v in flatten(value))
        else:
            flat.append((key, value))
    return flat


def yaml_text(value):
    """A value as YAML flow text for `--set key=TEXT`."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if isinstance(value, str):
        plain = _PLAIN.match(value) and not value.endswith(" ") and ": " not in value
        return value if plain else json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(yaml_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {yaml_text(v)}" for k, v in value.items()) + "}"
    if hasattr(value, "tolist"):  # a tensor or array of sizes
        return yaml_text(value.tolist())
    raise TypeError(f"unet_pipeline: a setting's value {value!r} ({type(value).__name__}) has no "
                    "YAML form; give a number, string, bool, None, list or dict")


def set_arguments(settings):
    """The `--set key=value` arguments of the settings, in order."""
    args = []
    for key, value in flatten(settings):
        args += ["--set", f"{key}={yaml_text(value)}"]
    return args


# plan's options that are not config keys: keyword -> command-line option.
PLAN_OPTIONS = {"gpu_mem": "--gpu-mem", "headroom": "--headroom", "host_mem": "--host-mem",
                "probe_voxels": "--probe-voxels"}


def plan_arguments(settings, measure=True):
    """plan's own options taken out of settings (the rest are config keys) as arguments;
    ways= (a name or a list of names) is `--way NAME` for each."""
    out = []
    for name in list(settings):
        if name in PLAN_OPTIONS:
            out += [PLAN_OPTIONS[name], str(settings.pop(name))]
    ways = settings.pop("ways", None)
    for way in [ways] if isinstance(ways, str) else ways or []:
        out += ["--way", str(way)]
    if not measure:
        out.append("--no-measure")
    return out


def data_keys(data):
    """`data=` as config keys: a dict of data.* keys, "synthetic", or a dataset folder.

    A folder's kind is what it holds: images/ and masks/ (PNG pairs: folder),
    case folders of NIfTI files (BraTS layout: nifti), a preprocessed cache
    (cache.json: cache).
    """
    if data is None:
        return {}
    if isinstance(data, dict):
        return {f"data.{k}" if not k.startswith("data.") else k: v for k, v in data.items()}
    path = os.path.abspath(os.fspath(data))
    if os.fspath(data) == "synthetic":
        return {"data.kind": "synthetic"}
    if not os.path.isdir(path):
        raise FileNotFoundError(f"unet_pipeline: data={os.fspath(data)!r} is not a folder; give a "
                                "dataset folder, \"synthetic\", or a dict of data.* keys")
    if os.path.isdir(os.path.join(path, "images")) and os.path.isdir(os.path.join(path, "masks")):
        return {"data.kind": "folder", "data.path": path}
    if os.path.exists(os.path.join(path, "cache.json")):
        return {"data.kind": "cache", "data.path": path}
    for entry in sorted(os.listdir(path)):
        case = os.path.join(path, entry)
        if os.path.isdir(case) and any(f.endswith((".nii", ".nii.gz")) for f in os.listdir(case)):
            return {"data.kind": "nifti", "data.path": path}
    raise ValueError(f"unet_pipeline: data={os.fspath(data)!r} holds neither images/ and masks/ "
                     "(PNG pairs) nor case folders of NIfTI files (BraTS layout); give "
                     "data={\"kind\": ..., \"path\": ...} (docs/CONFIG.md, data)")
