#!/usr/bin/env python3
"""The include rule of docs/ARCHITECTURE.md, checked over the source tree.

Each room (a folder, or the few files of a room that sit lower than the rest
of it) may include only the rooms listed for it; `common/**` is every room
under common/. The rooms, lowest first:

  common/base/                 base
  common/formats/              base, formats
  common/nnunet/ files         base, nnU-Net's files (nnunet_plans, nnunet_layout)
  common/layout/               base, the config's types (common/config/config.h, which hold
                               an nnU-Net plan's), nnU-Net's files, layout
  common/config/               base, formats, layout, nnU-Net's files, config
  common/run/                  the rooms above, run            (the torch-free floor ends here)
  common/device/               the torch-free floor, device
  common/model/                the torch-free floor, device, model
  common/data/                 the torch-free floor, device, data
  common/training/             the torch-free floor, device, model, training
  common/nnunet/ (the rest)    common/** (nnU-Net's import, export and validation)
  ipc/                         base, the device's budget (common/device/device_budget.h), ipc
  stage/                       common/**, ipc/, stage/
  encoder_proc/, decoder_proc/ common/**, ipc/, stage/, itself (never each other)
  launcher/                    common/**, ipc/, launcher/ (never tools, cli, a stage, bench)
  launcher/tools/              common/**, ipc/, launcher/, launcher/tools/
  bench/                       common/**, ipc/, launcher/, launcher/tools/, bench/
  launcher/cli/                everything but the stage folders (the dispatcher, the top)

tests/ and fuzz/ may include anything. Usage:
  check_layers.py [ROOT]     exits 1 listing every include that breaks the rule
  check_layers.py --self-test  proves the checker catches each kind of break
"""
import os
import re
import sys
import tempfile

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)

BASE = ("common/base/",)
FORMATS = BASE + ("common/formats/",)
CONFIG_TYPES = ("common/config/config.h",)
NNUNET_FILES = ("common/nnunet/nnunet_plans", "common/nnunet/nnunet_layout")
LAYOUT = FORMATS + CONFIG_TYPES + NNUNET_FILES + ("common/layout/",)
CONFIG = LAYOUT + NNUNET_FILES + ("common/config/",)
TORCH_FREE = CONFIG + ("common/run/",)  # the lower floor: no LibTorch
DEVICE = TORCH_FREE + ("common/device/",)
COMMON_ALL = ("common/",)

# (room, allowed prefixes, denied prefixes), the most specific room first.
RULES = [
    ("common/base/", BASE, ()),
    ("common/formats/", FORMATS, ()),
    ("common/layout/", BASE + CONFIG_TYPES + NNUNET_FILES + ("common/layout/",), ()),
    ("common/nnunet/nnunet_plans", BASE + NNUNET_FILES, ()),
    ("common/nnunet/nnunet_layout", BASE + NNUNET_FILES, ()),
    ("common/config/", CONFIG, ()),
    ("common/run/", TORCH_FREE, ()),
    ("common/device/", DEVICE, ()),
    ("common/model/", DEVICE + ("common/model/",), ()),
    ("common/data/", DEVICE + ("common/data/",), ()),
    ("common/training/", DEVICE + ("common/model/", "common/training/"), ()),
    ("common/nnunet/", COMMON_ALL, ()),
    ("common/", (), ()),  # a file loose in common/: every file has a room
    ("ipc/", BASE + ("common/device/device_budget.h", "ipc/"), ()),
    ("stage/", COMMON_ALL + ("ipc/", "stage/"), ()),
    ("encoder_proc/", COMMON_ALL + ("ipc/", "stage/", "encoder_proc/"), ()),
    ("decoder_proc/", COMMON_ALL + ("ipc/", "stage/", "decoder_proc/"), ()),
    ("launcher/cli/", COMMON_ALL + ("ipc/", "launcher/", "bench/"), ()),
    ("launcher/tools/", COMMON_ALL + ("ipc/", "launcher/"), ("launcher/cli/",)),
    ("launcher/", COMMON_ALL + ("ipc/", "launcher/"), ("launcher/tools/", "launcher/cli/")),
    ("bench/", COMMON_ALL + ("ipc/", "launcher/", "bench/"), ("launcher/cli/",)),
]
SOURCE_ENDINGS = (".h", ".hpp", ".cc", ".cpp", ".cu")


def rule_for(path):
    for room, allowed, denied in RULES:
        if path.startswith(room):
            return room, allowed, denied
    return None


def breaks(root):
    found = []
    for top in ("common", "ipc", "stage", "encoder_proc", "decoder_proc", "launcher", "bench"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not name.endswith(SOURCE_ENDINGS):
                    continue
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, root).replace(os.sep, "/")
                rule = rule_for(rel)
                if rule is None:
                    continue
                folder, allowed, denied = rule
                with open(full, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                for inc in INCLUDE.findall(text):
                    if "/" not in inc:
                        continue  # a generated or local header, not a layer
                    ok = inc.startswith(allowed) and not inc.startswith(denied)
                    if not ok:
                        found.append(f"{rel}: includes \"{inc}\", which {folder} may not "
                                     f"(allowed: {', '.join(allowed)}"
                                     + (f"; not {', '.join(denied)}" if denied else "") + ")")
    return found


def self_test():
    cases = {  # one break of each rule
        "common/base/a.h": '#include "common/config/config.h"\n',           # base reaching up
        "common/formats/a.h": '#include "common/run/run_dir.h"\n',           # a format knowing runs
        "common/layout/a.h": '#include "common/config/config_file.h"\n',     # layout reading files
        "common/layout/b.h": '#include "common/model/unet.h"\n',             # layout knowing torch
        "common/nnunet/nnunet_plans.cpp": '#include "common/config/config.h"\n',  # below config
        "common/nnunet/nnunet_layout.h": '#include "common/data/dataset.h"\n',
        "common/config/a.h": '#include "common/run/run_dir.h"\n',            # config knowing runs
        "common/config/b.h": '#include "common/nnunet/nnunet_import.h"\n',   # config importing
        "common/run/a.h": '#include "common/model/checkpoint.h"\n',          # runs knowing torch
        "common/device/a.h": '#include "common/model/unet.h"\n',             # device knowing models
        "common/device/b.h": '#include "common/nnunet/nnunet_export.h"\n',   # device exporting
        "common/model/a.h": '#include "common/data/dataset.h"\n',            # model reaching data
        "common/model/b.h": '#include "common/training/checkpoint.h"\n',     # model knowing steps
        "common/data/a.h": '#include "common/model/unet.h"\n',               # data reaching model
        "common/training/a.h": '#include "common/data/dataset.h"\n',         # training loading data
        "common/nnunet/a.h": '#include "launcher/pipeline.h"\n',             # nnU-Net running a run
        "common/c.h": '#include "common/base/errors.h"\n',                  # a file without a room
        "ipc/c.h": '#include "common/model/unet.h"\n',                      # ipc knowing the model
        "ipc/d.h": '#include "stage/stage_worker.h"\n',                     # ipc knowing a stage
        "ipc/e.h": '#include "common/device/device_memory.h"\n',            # only the budget
        "stage/e.h": '#include "launcher/pipeline.h"\n',                    # a stage needing the launcher
        "encoder_proc/f.h": '#include "decoder_proc/decoder_stage.h"\n',    # stages meeting
        "decoder_proc/g.h": '#include "encoder_proc/encoder_stage.h"\n',
        "launcher/h.h": '#include "launcher/tools/check.h"\n',              # orchestration needing a tool
        "launcher/i.h": '#include "stage/stage_worker.h"\n',                # the launcher linking a stage
        "launcher/j.h": '#include "bench/bench_cli.h"\n',                   # orchestration needing bench
        "launcher/k.h": '#include "launcher/cli/cli.h"\n',                  # orchestration needing the top
        "launcher/tools/l.h": '#include "launcher/cli/cli.h"\n',
        "bench/m.h": '#include "launcher/cli/cli.h"\n',                     # bench needing the top
        "launcher/cli/n.cpp": '#include "stage/stage_worker.h"\n',          # the top linking a stage
    }
    fine = {
        "common/layout/ok.h": '#include "common/config/config.h"\n',
        "common/config/ok.cpp": '#include "common/layout/pipeline_layout.h"\n#include "common/nnunet/nnunet_layout.h"\n',
        "common/model/ok.h": '#include "common/config/config.h"\n#include "common/device/device_memory.h"\n',
        "common/training/ok.h": '#include "common/model/unet.h"\n#include "common/run/run_dir.h"\n',
        "common/nnunet/ok.cpp": '#include "common/training/trained_model.h"\n#include "common/data/case_cache.h"\n',
        "ipc/ok.h": '#include "common/device/device_budget.h"\n',
        "stage/ok.h": '#include "common/model/unet.h"\n#include "ipc/wire.h"\n',
        "launcher/cli/cli.cpp": '#include "launcher/tools/check.h"\n#include "bench/bench_cli.h"\n',
        "launcher/tools/ok.cpp": '#include "launcher/pipeline.h"\n',
        "bench/ok.cpp": '#include "launcher/tools/memory_plan.h"\n',
    }
    with tempfile.TemporaryDirectory() as root:
        for rel, text in {**cases, **fine}.items():
            os.makedirs(os.path.join(root, os.path.dirname(rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w") as f:
                f.write(text)
        found = breaks(root)
    flagged = {line.split(":")[0] for line in found}
    missed = sorted(set(cases) - flagged)
    wrong = sorted(flagged - set(cases))
    if missed or wrong:
        print("check_layers self-test failed: missed", missed, "flagged by mistake", wrong)
        return 1
    print(f"check_layers self-test: all {len(cases)} breaks caught, {len(fine)} fine files passed")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    found = breaks(root)
    for line in found:
        print(line)
    if found:
        print(f"{len(found)} include(s) break the layering rule (docs/ARCHITECTURE.md)")
        return 1
    print("layering: every include follows the rule")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
