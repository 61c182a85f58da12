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

from user_case import machine  # the CPU fields, as the user case records them


def this_commit():
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        return subprocess.run(["git", "-C", here, "describe", "--always", "--dirty"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (no git)"


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
        prov["machine"] = json.loads(args.machine_json) if args.machine_json else machine()
    doc["provenance"] = prov
    with open(args.file, "w") as f:
        f.write(json.dumps(doc) + "\n")


if __name__ == "__main__":
    main()
