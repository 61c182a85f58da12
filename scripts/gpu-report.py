#!/usr/bin/env python3
"""Writes the GPU check's section of docs/BENCHMARKS.md from a gpu-check.json.

  scripts/gpu-report.py gpu-results/gpu-check.json  # render it into docs/BENCHMARKS.md
  scripts/gpu-report.py                             # add the (empty) section if it is missing
  scripts/gpu-report.py --check build-rehearse/out/gpu-check.json
      # check the JSON and render it into a temporary copy of the docs (which
      # stay as they are); for a rehearsal's JSON, written on CPU

The section lies between the markers below; everything else in the file is
left alone. A rehearsal's JSON (mode "rehearse") is refused outside --check:
its figures are CPU figures. Standard library only (any python3).
"""
import argparse
import json
import os
import sys
import tempfile

BEGIN = "<!-- gpu-check:begin -->"
END = "<!-- gpu-check:end -->"
DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "BENCHMARKS.md")
GIB = 2**30
TRAIN_STEPS = ("train_single_fp32", "train_pipeline_fp32", "train_single_bf16", "train_pipeline_bf16",
               "train_pipeline_parts4_bf16", "train_single_fp16", "train_pipeline_fp16",
               "train_single_offload_fp32", "train_pipeline_offload_fp32",
               "train_pipeline_nnunet_bf16", "train_pipeline_nnunet_offload_bf16",
               "train_pipeline_torchscript_bf16")
MODEL_NOTES = {"": "", "parts4": " (4 stages in turns)", "nnunet": " (nnU-Net ResEnc L)",
               "torchscript": " (TorchScript bundle)", "offload": " (blocks, offload)",
               "nnunet_offload": " (nnU-Net ResEnc L, blocks, offload)"}
# The brats16g runs and the plan row each is compared with.
PLAN_ROWS = {("single", ""): "single-process", ("pipeline", ""): "pipeline recompute",
             ("single", "offload"): "single-process offload",
             ("pipeline", "offload"): "pipeline offload"}


def train_step_name(name):
    """train_KIND[_MODEL]_PRECISION -> (KIND, MODEL, PRECISION)."""
    parts = name.split("_")
    return parts[1], "_".join(parts[2:-1]), parts[-1]


def model_note(model):
    """What a run's name adds to its row: " (4 stages in turns)", or nothing."""
    return MODEL_NOTES.get(model, f" ({model})")


def fail(msg):
    print(f"gpu-report: error: {msg}", file=sys.stderr)
    sys.exit(1)


def validate(doc):
    """Problems with the JSON's shape, as sentences (empty: fine)."""
    errs = []
    if not isinstance(doc, dict):
        return ["the file does not hold one JSON object"]
    if doc.get("schema") != 1:
        errs.append(f"schema is {doc.get('schema')!r}, expected 1")
    for key, kind in (("mode", str), ("machine", dict), ("steps", list)):
        if not isinstance(doc.get(key), kind):
            errs.append(f"'{key}' is missing or not a {kind.__name__}")
    for i, s in enumerate(doc.get("steps") or []):
        if not isinstance(s, dict) or not isinstance(s.get("name"), str):
            errs.append(f"step {i} has no name")
            continue
        if not isinstance(s.get("ok"), bool):
            errs.append(f"step {s['name']}: 'ok' is not true/false")
        if not isinstance(s.get("wall_s"), (int, float)):
            errs.append(f"step {s['name']}: 'wall_s' is not a number")
        if s.get("ok") is False and not s.get("reason"):
            errs.append(f"step {s['name']} failed without a reason")
    return errs


def gib(b):
    return "-" if b is None else f"{b / GIB:.2f}"


def num(x, fmt="{:.2f}"):
    return "-" if x is None else fmt.format(x)


def esc(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def step_note(s):
    f = s.get("figures") or {}
    n = s["name"]
    if n == "unpack" and f:
        return f"{f.get('debs')} .debs, {f.get('deb_mib')} MiB"
    if n == "configure" and f:
        return f"{f.get('generator')}; {f.get('libtorch') or 'LibTorch: see log'}"
    if n == "build" and f:
        return f"-j{f.get('jobs')}, targets: {f.get('targets')}"
    if n == "gpu_tests" and "total" in f:
        note = f"{f['passed']} passed, {f['failed']} failed, {f['skipped']} skipped of {f['total']}"
        if f.get("skip_reasons"):
            note += "; skipped because: " + "; ".join(f["skip_reasons"][:2])
        return note
    if n.startswith("train_") and f:
        if f.get("out_of_memory"):
            return "out of memory"
        if "final_loss" in f:
            return f"{f.get('steps')} steps, final loss {f['final_loss']:.4f}"
    if n == "plan" and (f.get("fp32") or {}).get("rows"):
        return "fp32: " + ", ".join(f"{r['name']} {plan_bytes(r) / GIB:.2f} GiB ({'fits' if r['fits'] else 'does not fit'})"
                                    for r in f["fp32"]["rows"])
    if n == "allocator_reserve" and f:
        return f.get("not_measured") or f"largest reserve {num(f.get('max_reserve_fraction'), '{:.1%}')} of the tensors"
    if n.startswith("bench_") and isinstance(f, dict) and (f.get("results") or f.get("rows")):
        return f"{len(f.get('results') or f.get('rows'))} rows"
    return ""


def plan_bytes(row):
    """What plan says a way needs (a plan without the allowances: its estimate)."""
    return row.get("needed_bytes", row.get("peak_bytes"))


def plan_row(doc, precision, name):
    plan = next((s for s in doc["steps"] if s["name"] == "plan"), None)
    rows = (((plan or {}).get("figures") or {}).get(precision) or {}).get("rows") or []
    return next((r for r in rows if r.get("name") == name), None)


def reserve_section(by):
    """The caching allocator's reserve per way, against plan's allowance for it."""
    f = (by.get("allocator_reserve") or {}).get("figures") or {}
    if not f.get("rows"):
        return []
    out = ["", "### The caching allocator's reserve: measured against `plan`'s allowance", "",
           f"Reserved over allocated per way (each process's reserved peak, summed), beside plan's tensor "
           f"bytes and what it says the way needs; plan's default allowance is "
           f"{num(f.get('default_reserve_fraction'), '{:.0%}')} of the tensor bytes."
           + (f" The runs had `{f['cuda_alloc_conf']}`." if f.get("cuda_alloc_conf") else "")
           + (f" Reserved not measured: {f['not_measured']}." if f.get("not_measured") else ""), "",
           "| run | way | allocated (GiB) | reserved (GiB) | reserve | plan: tensors (GiB) "
           "| plan / allocated | plan: needed (GiB) |",
           "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in f["rows"]:
        out.append(f"| {r['run']} | {r['way']} | {gib(r.get('allocated_bytes'))} | {gib(r.get('reserved_bytes'))} | "
                   f"{num(r.get('reserve_fraction'), '{:.1%}')} | {gib(r.get('plan_tensor_bytes'))} | "
                   f"{num(r.get('plan_over_allocated'))} | {gib(r.get('plan_needed_bytes'))} |")
    return out


def render(doc, source):
    m = doc.get("machine") or {}
    t = doc.get("torch") or {}
    g = doc.get("gpu")
    steps = doc["steps"]
    by = {s["name"]: s for s in steps}
    out = [BEGIN, "", "## GPU check", ""]
    rehearsal = doc.get("mode") == "rehearse"
    out.append(
        f"Generated by `scripts/gpu-report.py` from `{source}`, written by `scripts/gpu-check.sh "
        f"{'rehearse' if rehearsal else 'run'}` (started {doc.get('started', '?')}, {doc.get('wall_s', '?')} s "
        "of steps). Every step is bounded by a timeout; a step that failed says why.")
    if rehearsal:
        out += ["", "**A rehearsal on CPU** (configs/tiny.yaml, libraries only from the unpacked .debs): "
                "these are not GPU figures."]
    out += ["", "### Machine", ""]
    if g:
        mem = f", {g['memory_mib'] / 1024:.0f} GiB" if g.get("memory_mib") else ""
        drv = f", driver {g['driver']}" if g.get("driver") else ""
        out.append(f"- GPU: {g.get('name')}{mem}{drv} (x{g.get('count', 1)}; from {g.get('source')})")
    else:
        out.append("- GPU: none")
    out.append(f"- CPU: {m.get('cpu')}, {m.get('cores')} cores, {m.get('memory_gib')} GiB; "
               f"{m.get('os')}, Linux {m.get('kernel')}, glibc {m.get('glibc')}")
    out.append(f"- torch {t.get('version', t.get('error', '?'))} (CUDA {t.get('cuda')}); "
               f"nvcc: {m.get('nvcc') or 'none'}; {m.get('compiler')}; {m.get('cmake')}; ninja {m.get('ninja')}")
    mb = doc.get("memory_budget")
    if mb:
        out.append(f"- device memory budget: {mb['bytes'] / GIB:.0f} GiB per process ({mb['via']})")
    out += ["", "### Steps", "", "| step | result | wall (s) | notes |", "|---|---|---:|---|"]
    for s in steps:
        result = "ok" if s["ok"] else ("skipped" if s.get("skipped") else "**failed**")
        note = step_note(s) if s["ok"] else s.get("reason", "")
        out.append(f"| {s['name']} | {result} | {s['wall_s']:.1f} | {esc(note)} |")

    # Peak device memory against the plan.
    out += ["", "### Peak device memory: measured against `plan`", "",
            "Measured: each process's peak of the caching allocator (`peak_device_bytes` in the run's "
            "`summary.json`, no CUDA context). Predicted: `unet-pipeline plan --gpu-mem 16GiB` for the "
            "same config and precision: what the way needs on the card (its tensor bytes, the "
            "allocator's reserve, a workspace and a context per process), and whether that fits the "
            "card less the headroom.", "",
            "| run | precision | out of memory | measured peak per process (GiB) | measured sum (GiB) "
            "| plan row | plan: needed (GiB) | plan: fits |",
            "|---|---|---|---|---:|---|---:|---|"]
    for name in TRAIN_STEPS:
        s = by.get(name)
        if not s:
            continue
        kind, model, prec = train_step_name(name)
        f = s.get("figures") or {}
        peaks = f.get("peak_device_bytes") or {}
        per = ", ".join(f"{p} {gib(b)}" for p, b in peaks.items()) or "-"
        total = sum(peaks.values()) if peaks else None
        # The plan was made for the two-stage brats16g config only.
        row = plan_row(doc, prec, PLAN_ROWS[(kind, model)]) if (kind, model) in PLAN_ROWS else None
        if f.get("out_of_memory"):
            oom = "yes"
        elif s["ok"]:
            oom = "no"
        else:
            oom = "skipped" if s.get("skipped") else "- (failed)"
        label = "single-process" if kind == "single" else "pipeline (recompute)"
        out.append(f"| {label}{model_note(model)} | {prec} | {oom} | "
                   f"{per} | {gib(total)} | {row['name'] if row else '-'} | "
                   f"{gib(plan_bytes(row)) if row else '-'} | {('yes' if row['fits'] else 'no') if row else '-'} |")
    out += reserve_section(by)

    # Step times of the training runs.
    out += ["", "### Training runs: step time", "",
            "Three steps each; the first includes start-up work (allocator, kernels), so the median "
            "leaves it out.", "",
            "| run | precision | steps | median step (s), after the first | wall (s) | samples/s |",
            "|---|---|---:|---:|---:|---:|"]
    timed = [n for n in TRAIN_STEPS if "median_step_s_after_first" in ((by.get(n) or {}).get("figures") or {})]
    if not timed:
        out[-6:] = out[-6:-4] + ["No training run finished."]
    for name in timed:
        f = by[name]["figures"]
        kind, model, prec = train_step_name(name)
        out.append(f"| {kind}{model_note(model)} | {prec} | {f.get('steps', '-')} | {f['median_step_s_after_first']:.4f} | "
                   f"{num(f.get('wall_s'))} | {num(f.get('samples_per_s'), '{:.1f}')} |")

    # Transport.
    tr = (by.get("bench_transport") or {}).get("figures") or {}
    if tr.get("results"):
        method = tr.get("method") or {}
        out += ["", "### Transport (`unet-pipeline bench transport`)", "",
                f"One-way, forked consumer, {method.get('slots', '?')} slots, median of "
                f"{method.get('repeats', '?')} streams of {method.get('seconds_per_stream', '?')} s; "
                "GB/s = 1e9 bytes/s.", "",
                "| transport | size | GB/s | memcpy GB/s | ratio | latency (us) |",
                "|---|---:|---:|---:|---:|---:|"]
        for r in tr["results"]:
            b = r.get("bytes", 0)
            size = f"{b // 2**20} MiB" if b >= 2**20 else f"{b // 1024} KiB"
            out.append(f"| {r.get('transport')} | {size} | {num(r.get('gbps'))} | {num(r.get('memcpy_gbps'))} | "
                       f"{num(r.get('ratio'))} | {num(r.get('latency_us'), '{:.1f}')} |")

    # Bench step.
    st = (by.get("bench_step") or {}).get("figures") or {}
    if st.get("results"):
        out += ["", "### Step time: pipeline against single-process (`unet-pipeline bench step`)", "",
                f"`{st.get('config')}` {' '.join('--set ' + x for x in st.get('sets') or [])}; "
                f"{st.get('rounds')} round(s) of {st.get('steps')} steps, the first {st.get('warmup')} dropped.", "",
                "| row | schedule | lock | activations | median step (s) | ratio |",
                "|---|---|---|---|---:|---|"]
        for r in st["results"]:
            if not r.get("built", True):
                out.append(f"| {r.get('label')} | - | - | - | - | {esc(r.get('note', 'not built'))} |")
                continue
            ratio = f"{r['ratio']:.3f}x {r.get('ratio_to')}" if r.get("ratio_to") else "(peer)"
            out.append(f"| {r.get('label')} | {r.get('schedule', '-')} | {r.get('lock', '-')} | "
                       f"{r.get('activations', '-')} | {num(r.get('median_step_s'), '{:.4f}')} | {ratio} |")
    # Bench capacity: the budget on the card.
    cap = (by.get("bench_capacity") or {}).get("figures") or {}
    if cap.get("rows"):
        out += ["", "### Capacity under `train.memory_budget` on the card (`unet-pipeline bench capacity`)", "",
                f"`{cap.get('config')}`, budget {gib(cap.get('budget_bytes', 0))} GiB, "
                f"{cap.get('steps')} step(s) per probe; the search stops at `--max-scale`.", "",
                "| way | largest that trains | parameters | peak tensors (GiB) | x plain |",
                "|---|---|---:|---:|---:|"]
        for r in cap["rows"]:
            out.append(f"| {r.get('way')} | {r.get('size') or '(none)'} | {r.get('parameters', 0):,} | "
                       f"{gib(r.get('peak_device_tensor_bytes', 0))} | {num(r.get('vs_plain'))} |")
    failed = [s["name"] for s in steps if not s["ok"]]
    out += ["", f"Result: {'every step passed' if not failed else 'failed: ' + ', '.join(failed)}.", "", END]
    return "\n".join(out) + "\n"


def empty_section():
    return (f"{BEGIN}\n\n## GPU check\n\nNo GPU has run `scripts/gpu-check.sh run` yet; "
            f"`scripts/gpu-report.py gpu-results/gpu-check.json` fills this section in.\n\n{END}\n")


def splice(text, section):
    """text with its marker section replaced by section (appended when missing)."""
    b, e = text.find(BEGIN), text.find(END)
    if b >= 0 and e > b:
        return text[:b] + section + text[e + len(END):].lstrip("\n")
    if b >= 0 or e >= 0:
        fail("docs/BENCHMARKS.md has only one of the gpu-check markers; fix it by hand")
    return text.rstrip("\n") + "\n\n" + section


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json", nargs="?", help="gpu-check.json (from scripts/gpu-check.sh run)")
    ap.add_argument("--check", action="store_true",
                    help="check the JSON and render into a temporary copy of the docs, not the docs")
    ap.add_argument("--doc", default=DOC, help="the Markdown file (default docs/BENCHMARKS.md)")
    args = ap.parse_args()
    with open(args.doc) as f:
        text = f.read()
    if args.json is None:
        if args.check:
            fail("--check needs a gpu-check.json")
        if BEGIN in text:
            print("gpu-report: the gpu-check section is there already; nothing to do")
            return
        section = empty_section()
    else:
        try:
            with open(args.json) as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            fail(f"cannot read {args.json}: {e}")
        errs = validate(doc)
        if errs:
            fail(f"{args.json}: " + "; ".join(errs))
        if doc["mode"] == "rehearse" and not args.check:
            fail(f"{args.json} is a rehearsal on CPU (mode rehearse): use --check; only a GPU run goes into the docs")
        section = render(doc, args.json)
    new = splice(text, section)
    if args.check:
        fd, path = tempfile.mkstemp(prefix="BENCHMARKS-", suffix=".md")
        with os.fdopen(fd, "w") as f:
            f.write(new)
        print(section, end="")
        print(f"gpu-report: ok: {args.json} is well formed; rendered into {path} (docs untouched)")
        return
    with open(args.doc, "w") as f:
        f.write(new)
    print(f"gpu-report: wrote the gpu-check section of {os.path.relpath(args.doc)}")


if __name__ == "__main__":
    main()
