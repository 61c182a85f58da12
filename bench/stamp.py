#!/usr/bin/env python3
"""Adds a `provenance` object to a result JSON: the commit, date and command
that measured it, and the machine where the JSON names none (plan's).

usage: stamp.py FILE --command CMD [--commit C] [--date D] [--runs TEXT]
                [--machine-json JSON] [--recorded TEXT]

bench/run-all.sh stamps each file it writes; the defaults describe that run
(this checkout's commit, "-dirty" with uncommitted changes; today, UTC; this
machine). The binaries do not know their commit, so the stamp is added here.
"""
import argparse
import datetime
import json
import os
import subprocess


def this_commit():
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        return subprocess.run(["git", "-C", here, "describe", "--always", "--dirty"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (no git)"


def this_machine():
    """The CPU fields bench/bench_machine.h records, as far as /proc tells."""
    model, avx512 = "unknown", False
    with open("/proc/cpuinfo") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key.strip() == "model name" and model == "unknown":
                model = value.strip()
            if key.strip() == "flags":
                avx512 = "avx512f" in value.split()
                break
    out = {"cpu_model": model, "avx512": avx512, "cores": os.cpu_count(),
           "memory_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
           "kernel": f"{os.uname().sysname} {os.uname().release}"}
    if os.environ.get("ONEDNN_MAX_CPU_ISA"):
        out["onednn_max_cpu_isa"] = os.environ["ONEDNN_MAX_CPU_ISA"]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file")
    ap.add_argument("--command", required=True)
    ap.add_argument("--commit")
    ap.add_argument("--date")
    ap.add_argument("--runs")
    ap.add_argument("--machine-json", help="the machine, where the file names none")
    ap.add_argument("--recorded", default="written by the command")
    args = ap.parse_args()
    with open(args.file) as f:
        doc = json.load(f)
    prov = {"commit": args.commit or this_commit(),
            "date": args.date or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
            "command": args.command, "recorded": args.recorded}
    if args.runs:
        prov["runs"] = args.runs
    if "machine" not in doc:
        prov["machine"] = json.loads(args.machine_json) if args.machine_json else this_machine()
    doc["provenance"] = prov
    with open(args.file, "w") as f:
        f.write(json.dumps(doc) + "\n")


if __name__ == "__main__":
    main()
