#!/usr/bin/env python3
"""The include rule of docs/ARCHITECTURE.md, checked over the source tree.

Each folder is a layer and may include only the layers listed for it:

  common/              common/
  common/model/        common/, common/model/
  common/data/         common/, common/data/
  ipc/                 common/, ipc/                      (no model, no stage)
  stage/               common/**, ipc/, stage/
  encoder_proc/        common/**, ipc/, stage/, encoder_proc/
  decoder_proc/        common/**, ipc/, stage/, decoder_proc/
  launcher/            common/**, ipc/, launcher/         (never a stage)
  launcher/tools/      common/**, ipc/, launcher/, launcher/tools/
  bench/               common/**, ipc/, launcher/**, bench/
  launcher/cli.cpp and launcher/main.cpp (the command dispatcher, the top)
                       anything but the stage folders

tests/ and fuzz/ may include anything. Usage:
  check_layers.py [ROOT]     exits 1 listing every include that breaks the rule
  check_layers.py --self-test  proves the checker catches each kind of break
"""
import os
import re
import sys
import tempfile

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
STAGES = ("stage/", "encoder_proc/", "decoder_proc/")
COMMON_ALL = ("common/",)  # a prefix: common/, common/model/, common/data/

# (folder, allowed prefixes, denied prefixes), the most specific folder first.
RULES = [
    ("launcher/cli.cpp", ("common/", "ipc/", "launcher/", "bench/"), ()),
    ("launcher/main.cpp", ("common/", "ipc/", "launcher/", "bench/"), ()),
    ("common/model/", ("common/model/", "common/"), ("common/data/",)),
    ("common/data/", ("common/data/", "common/"), ("common/model/",)),
    ("common/", ("common/",), ("common/model/", "common/data/")),
    ("ipc/", ("common/", "ipc/"), ("common/model/", "common/data/")),
    ("stage/", COMMON_ALL + ("ipc/", "stage/"), ()),
    ("encoder_proc/", COMMON_ALL + ("ipc/", "stage/", "encoder_proc/"), ()),
    ("decoder_proc/", COMMON_ALL + ("ipc/", "stage/", "decoder_proc/"), ()),
    ("launcher/tools/", COMMON_ALL + ("ipc/", "launcher/"), ()),
    ("launcher/", COMMON_ALL + ("ipc/",  "launcher/"), ("launcher/tools/",)),
    ("bench/", COMMON_ALL + ("ipc/", "launcher/", "bench/"), ()),
]
SOURCE_ENDINGS = (".h", ".hpp", ".cc", ".cpp", ".cu")


def rule_for(path):
    for folder, allowed, denied in RULES:
        if path == folder or (folder.endswith("/") and path.startswith(folder)):
            return folder, allowed, denied
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
    cases = {
        "common/a.h": '#include "common/model/unet.h"\n',        # common reaching up
        "common/model/b.h": '#include "common/data/dataset.h"\n',  # model reaching data
        "ipc/c.h": '#include "common/model/unet.h"\n',            # ipc knowing the model
        "ipc/d.h": '#include "stage/stage_worker.h"\n',           # ipc knowing a stage
        "stage/e.h": '#include "launcher/pipeline.h"\n',          # a stage needing the launcher
        "encoder_proc/f.h": '#include "decoder_proc/decoder_stage.h"\n',  # stages meeting
        "decoder_proc/g.h": '#include "encoder_proc/encoder_stage.h"\n',
        "launcher/h.h": '#include "launcher/tools/check.h"\n',    # orchestration needing a tool
        "launcher/i.h": '#include "stage/stage_worker.h"\n',      # the launcher linking a stage
    }
    fine = {
        "common/model/ok.h": '#include "common/config.h"\n',
        "stage/ok.h": '#include "common/model/unet.h"\n#include "ipc/wire.h"\n',
        "launcher/cli.cpp": '#include "launcher/tools/check.h"\n#include "bench/bench_cli.h"\n',
        "launcher/tools/ok.cpp": '#include "launcher/child_process.h"\n',
        "bench/ok.cpp": '#include "launcher/tools/trained_model.h"\n',
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
