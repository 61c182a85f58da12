#!/usr/bin/env python3
"""unet_pipeline.settings: keywords to `--set key=value`, data= to data.* keys.

usage: settings_test.py SOURCE_DIR

Each check is one way a setting could reach the program wrong: a name not
turned into its key, a value YAML would read as something else, a dataset
folder taken for another kind.
"""
import os
import sys
import tempfile


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.path.insert(0, os.path.join(os.path.abspath(sys.argv[1]), "python"))
    from unet_pipeline import settings  # noqa: PLC0415

    failures = []

    def check(what, got, want):
        if got != want:
            failures.append(f"{what}: {got!r}, expected {want!r}")

    check("double underscores", settings.set_arguments({"train__steps": 2}),
          ["--set", "train.steps=2"])
    check("dotted name", settings.set_arguments({"train.lr": 0.01}), ["--set", "train.lr=0.01"])
    check("nested dict", settings.set_arguments({"pipeline": {"stages": {"encoder": {
        "device": "cuda:0"}}}}), ["--set", "pipeline.stages.encoder.device=cuda:0"])
    check("devices", settings.set_arguments({"devices": ["cuda:0", "cuda:1"]}),
          ["--set", "pipeline.devices=[cuda:0, cuda:1]"])
    given = {"gpu_mem": "16GiB", "ways": ["single-process", "pipeline offload"],
             "train__steps": 2}
    check("plan's own options", settings.plan_arguments(given, measure=False),
          ["--gpu-mem", "16GiB", "--way", "single-process", "--way", "pipeline offload",
           "--no-measure"])
    check("what plan_arguments leaves", given, {"train__steps": 2})
    check("one way", settings.plan_arguments({"ways": "pipeline offload"}),
          ["--way", "pipeline offload"])
    check("bool", settings.yaml_text(True), "true")
    check("None", settings.yaml_text(None), "null")
    check("a word", settings.yaml_text("on"), "on")
    check("a path", settings.yaml_text("/data/my cases/x"), "/data/my cases/x")
    check("a string with ': '", settings.yaml_text("a: b"), '"a: b"')
    check("a string with a comma", settings.yaml_text("a,b"), '"a,b"')
    check("an empty string", settings.yaml_text(""), '""')
    check("a list of lists", settings.yaml_text([[1, 2, 3], [1, 3], [3]]),
          "[[1, 2, 3], [1, 3], [3]]")
    check("a dict value", settings.yaml_text({"a": 1}), "{a: 1}")
    try:
        settings.yaml_text(object())
        failures.append("an object without a YAML form was accepted")
    except TypeError as e:
        check("no YAML form names the value", "has no YAML form" in str(e), True)

    with tempfile.TemporaryDirectory() as tmp:
        png = os.path.join(tmp, "png")
        os.makedirs(os.path.join(png, "images"))
        os.makedirs(os.path.join(png, "masks"))
        check("PNG pairs", settings.data_keys(png), {"data.kind": "folder", "data.path": png})
        brats = os.path.join(tmp, "brats")
        os.makedirs(os.path.join(brats, "case00"))
        open(os.path.join(brats, "case00", "case00_flair.nii.gz"), "w").close()
        check("BraTS cases", settings.data_keys(brats), {"data.kind": "nifti", "data.path": brats})
        cache = os.path.join(tmp, "cache")
        os.makedirs(cache)
        open(os.path.join(cache, "cache.json"), "w").close()
        check("a cache", settings.data_keys(cache), {"data.kind": "cache", "data.path": cache})
        check("synthetic", settings.data_keys("synthetic"), {"data.kind": "synthetic"})
        check("a dict", settings.data_keys({"kind": "nnunet", "data.fold": 1}),
              {"data.kind": "nnunet", "data.fold": 1})
        for bad, error in ((os.path.join(tmp, "nowhere"), FileNotFoundError), (tmp, ValueError)):
            try:
                settings.data_keys(bad)
                failures.append(f"data={bad!r} was accepted")
            except error as e:
                check(f"data={bad!r} names the value", repr(bad) in str(e), True)

    for line in failures:
        print(line)
    if failures:
        sys.exit(f"settings_test: {len(failures)} failures")
    print("settings_test: ok")


if __name__ == "__main__":
    main()
