#!/usr/bin/env bash
# The GPU check: builds unet-pipeline on a machine with an NVIDIA GPU but no
# package registry (only its own compiler, CMake, ninja, nvcc and a Python
# whose torch is the LibTorch we build against), runs the GPU tests, trains
# brats16g under a 16 GiB device budget and runs the benches, recording every
# step in one JSON file. Three modes:
#
#   scripts/gpu-check.sh fetch     # here, with apt: downloads the .debs of
#       LIBRARY_PACKAGES (scripts/packages.sh) and of their dependency closure,
#       less BASE_PACKAGES (what every machine with a compiler has), into .debs/
#       with .debs/MANIFEST; prints the set and its size. Carry .debs/ along.
#   scripts/gpu-check.sh run       # there: unpacks .debs/ into .gpu-prefix/,
#       configures (-G Ninja) and builds build-gpu/ against
#       `python3 -c 'import torch'`'s LibTorch on every core (first the
#       binaries, gpu_test and cuda_test), runs `ctest -L gpu`, `plan`, brats16g
#       single-process and pipeline (activations recompute) in fp32, bf16 and fp16
#       for 3 steps under train.memory_budget=16GiB (then, per way, the caching
#       allocator's reserved against allocated bytes against plan's
#       prediction), `bench transport`, `bench
#       step` (configs/small.yaml on cuda) and a short `bench capacity` (tiny
#       under a 96 MiB budget on the card), and last builds every other target.
#       Every step is bounded (timeout; all of them within
#       UP_GPU_CHECK_BUDGET_S, default 450 s) and recorded, also when an
#       earlier one failed (a failed build skips what needs it), in
#       ${OUT:-gpu-results}/gpu-check.json; the logs go to logs.tar.gz beside
#       it. Exits 1 when a step failed.
#   scripts/gpu-check.sh rehearse  # here, as root: `fetch`, then `run` inside a
#       private mount namespace whose /usr hides every installed package that
#       such a machine would not have (anything outside the closure of the
#       compiler, CMake, ninja, ccache, Python and BASE_PACKAGES), on CPU with
#       configs/tiny.yaml, building only what the steps need (ccache makes a
#       second rehearsal quick). Fails when the package list misses something
#       the build needs; prints why and exits 0 when it cannot run at all
#       (not root, no unshare/overlayfs, no apt, no .venv torch).
#       Output: ${OUT:-build-rehearse/out}; then gpu-report.py --check on it.
#
# Knobs (rehearse sets its own): UP_GPU_CHECK_DEVICE (cuda|cpu),
# UP_GPU_BUILD_DIR (build-gpu), UP_GPU_PREFIX (.gpu-prefix), UP_GPU_CHECK_TARGETS
# (what the steps need), UP_GPU_CHECK_BUILD_ALL (1: the rest at the end),
# UP_GPU_CHECK_BUDGET_S, UP_GPU_CHECK_BUILD_S (300), UP_GPU_CHECK_TRAIN_S (75).
#
# scripts/gpu-report.py turns a gpu-check.json into docs/BENCHMARKS.md's
# gpu-check section.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
# shellcheck source=scripts/packages.sh
source scripts/packages.sh

DEBS_DIR="$ROOT/.debs"
ARCH_TRIPLET=x86_64-linux-gnu
# What the rehearsal leaves visible besides BASE_PACKAGES: the tools a GPU
# machine brings (its compiler, CMake, ninja, Python) and ccache.
REHEARSE_HOST_PACKAGES=(build-essential cmake ninja-build ccache python3 python3-venv)

say() { echo "gpu-check: $*"; }
die() { echo "gpu-check: error: $*" >&2; exit 1; }
usage() { echo "usage: scripts/gpu-check.sh fetch|run|rehearse" >&2; exit 2; }

# ---------------------------------------------------------------- closure --
# closure_of [-i] PACKAGE...: the dependency closure (Depends, Pre-Depends) of
# PACKAGE..., one name a line. A virtual package resolves to the first of its
# providers (an installed one with -i); an alternative is satisfied by any
# member already chosen or in BASE_PACKAGES (or, with -i, installed). Without
# -i, BASE_PACKAGES are left out and not followed.
closure_of() {
  local installed="" base="${BASE_PACKAGES[*]}"
  if [ "$1" = "-i" ]; then
    shift
    installed="$(dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' | awk '$1 == "ii" {print $2}' | tr '\n' ' ')"
    base=""
  fi
  apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
      --no-replaces --no-enhances ${installed:+--installed} "$@" |
    awk -v roots="$*" -v base="$base" -v installed="$installed" '
      function flush() { if (grp != "") { ng[cur]++; g[cur, ng[cur]] = grp; grp = "" } }
      function pick(list,   m, c, k) {  # the member to add, "" when satisfied
        m = split(list, c, " ")
        for (k = 1; k <= m; k++) if (c[k] in isbase || c[k] in sel) return ""
        if (installed != "") for (k = 1; k <= m; k++) if (c[k] in inst) return c[k]
        for (k = 1; k <= m; k++) if (c[k] !~ /^</) return c[k]
        return ""
      }
      BEGIN {
        split(base, b, " "); for (i in b) isbase[b[i]] = 1
        split(installed, v, " "); for (i in v) { sub(/:.*/, "", v[i]); inst[v[i]] = 1 }
      }
      { sub(/:any$/, "") }
      /^[^ ]/ { flush(); cur = $0; next }
      /^ [ |](Pre)?Depends: / {
        name = $2; sub(/:any$/, "", name)
        grp = grp (grp == "" ? "" : " ") name
        if (substr($0, 2, 1) != "|" && name !~ /^</) flush()
        next
      }
      /^    [^ ]/ { grp = grp " " $1; next }  # a provider of the virtual package above
      /^ / { flush(); next }
      END {
        flush()
        n = split(roots, r, " ")
        for (i = 1; i <= n; i++) if (!(r[i] in isbase) && !(r[i] in sel)) { sel[r[i]] = 1; q[++t] = r[i] }
        for (h = 1; h <= t; h++) {
          p = q[h]
          for (j = 1; j <= ng[p]; j++) {
            c1 = pick(g[p, j])
            if (c1 != "") { sel[c1] = 1; q[++t] = c1 }
          }
        }
        for (i = 1; i <= t; i++) print q[i]
      }'
}

# ------------------------------------------------------------------ fetch --
fetch() {
  if ! command -v apt-get >/dev/null || ! command -v apt-cache >/dev/null; then
    die "fetch needs apt-get and apt-cache (a Debian 12 machine)"
  fi
  if ! apt-cache show "${LIBRARY_PACKAGES[@]}" >/dev/null 2>&1; then
    say "apt lists lack some of LIBRARY_PACKAGES; running apt-get update"
    apt-get update -qq
  fi
  local pkgs
  mapfile -t pkgs < <(closure_of "${LIBRARY_PACKAGES[@]}")
  [ "${#pkgs[@]}" -gt 0 ] || die "empty dependency closure of: ${LIBRARY_PACKAGES[*]}"
  mkdir -p "$DEBS_DIR"
  # 'URI' FILE SIZE HASH per package: the names and sizes apt-get download gives.
  local uris
  uris="$(apt-get download --print-uris "${pkgs[@]}")" || die "apt-get download --print-uris failed"
  local manifest="$DEBS_DIR/MANIFEST.new" missing=() total=0 i=0 file size pkg
  : >"$manifest"
  while read -r _ file size _; do
    pkg="${file%%_*}"  # NAME_VERSION_ARCH.deb
    printf '%s %s %s\n' "$pkg" "$file" "$size" >>"$manifest"
    total=$((total + size))
    if [ "$(stat -c %s "$DEBS_DIR/$file" 2>/dev/null || echo -1)" != "$size" ]; then
      missing+=("$pkg")
    fi
    i=$((i + 1))
  done <<<"$uris"
  [ "$i" -eq "${#pkgs[@]}" ] || die "apt-get --print-uris named $i files for ${#pkgs[@]} packages"
  if [ "${#missing[@]}" -gt 0 ]; then
    say "downloading ${#missing[@]} .debs"
    (cd "$DEBS_DIR" && apt-get download -q -o APT::Sandbox::User=root "${missing[@]}" >/dev/null) ||
      die "apt-get download failed"
  fi
  # Only what the list asks for: a package dropped from it leaves .debs/ too.
  local f
  for f in "$DEBS_DIR"/*.deb; do
    [ -e "$f" ] || continue
    awk -v f="$(basename "$f")" '$2 == f {found = 1} END {exit !found}' "$manifest" || rm -f "$f"
  done
  mv "$manifest" "$DEBS_DIR/MANIFEST"
  say "${#pkgs[@]} packages, $(awk -v b="$total" 'BEGIN {printf "%.1f", b / 1048576}') MiB of .debs in .debs/:"
  echo "  ${pkgs[*]}" | fold -s -w 100 | sed '2,$s/^/  /'
  say "left out (BASE_PACKAGES in scripts/packages.sh): ${BASE_PACKAGES[*]}"
}

# -------------------------------------------------------------------- run --
# The JSON bookkeeping: a small stdlib-only Python program, any python3.
write_helper() {
  cat >"$1" <<'PY'
"""gpu-check.sh's bookkeeping: machine info, log parsing, gpu-check.json."""
import json, os, platform, re, statistics, subprocess, sys, time

def sh(*cmd, timeout=60):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return p.stdout.strip() if p.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None

def first_line(s):
    return s.splitlines()[0].strip() if s else None

def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""

def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None

def machine(state, mode, device):
    info = {"hostname": platform.node(), "kernel": platform.release()}
    osr = read("/etc/os-release")
    m = re.search(r'^PRETTY_NAME="?([^"\n]*)', osr, re.M)
    info["os"] = m.group(1) if m else None
    m = re.search(r"^model name\s*:\s*(.*)$", read("/proc/cpuinfo"), re.M)
    info["cpu"] = m.group(1).strip() if m else platform.processor()
    info["cores"] = os.cpu_count()
    m = re.search(r"^MemTotal:\s*(\d+) kB", read("/proc/meminfo"), re.M)
    info["memory_gib"] = round(int(m.group(1)) / 2**20, 1) if m else None
    info["glibc"] = platform.libc_ver()[1] or None
    info["compiler"] = first_line(sh("c++", "--version"))
    info["cmake"] = first_line(sh("cmake", "--version"))
    info["ninja"] = sh("ninja", "--version")
    nvcc = sh("nvcc", "--version") or sh("/usr/local/cuda/bin/nvcc", "--version")
    info["nvcc"] = nvcc.splitlines()[-1].strip() if nvcc else None
    info["python"] = first_line(sh("python3", "--version"))
    gpu = None
    smi = sh("nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader,nounits")
    if smi:
        gpus = [[x.strip() for x in line.split(",")] for line in smi.splitlines() if line.strip()]
        gpu = {"source": "nvidia-smi", "count": len(gpus), "name": gpus[0][0],
               "memory_mib": int(float(gpus[0][1])) if gpus[0][1].replace(".", "").isdigit() else None,
               "driver": gpus[0][2]}
    code = ("import json, torch\n"
            "d = {'version': torch.__version__, 'cuda': torch.version.cuda,"
            " 'cmake_prefix_path': torch.utils.cmake_prefix_path,"
            " 'cuda_available': torch.cuda.is_available(),"
            " 'devices': [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]}\n"
            "print(json.dumps(d))")
    out = sh("python3", "-c", code, timeout=120)
    torch = json.loads(out.splitlines()[-1]) if out else {"error": "python3 -c 'import torch' failed"}
    if gpu is None and torch.get("devices"):
        gpu = {"source": "torch", "count": len(torch["devices"]), "name": torch["devices"][0]}
    doc = {"schema": 1, "mode": mode, "device": device,
           "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "machine": info, "torch": torch, "gpu": gpu}
    extra = os.environ.get("UP_GPU_CHECK_EXTRA_JSON")
    if extra and load_json(extra) is not None:
        doc.update(load_json(extra))
    with open(os.path.join(state, "head.json"), "w") as f:
        json.dump(doc, f)
    print(f"{info['cpu']}, {info['cores']} cores; torch {torch.get('version')}; "
          f"GPU: {gpu['name'] if gpu else 'none'}")

def write_out(state, out_json):
    doc = load_json(os.path.join(state, "head.json")) or {}
    doc.update(load_json(os.path.join(state, "budget.json")) or {})
    steps = [json.loads(l) for l in read(os.path.join(state, "steps.jsonl")).splitlines() if l.strip()]
    doc["steps"] = steps
    doc["ok"] = bool(steps) and all(s["ok"] for s in steps)
    doc["failed"] = [s["name"] for s in steps if not s["ok"]]
    doc["wall_s"] = round(sum(s.get("wall_s") or 0 for s in steps), 1)
    doc["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    tmp = out_json + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(tmp, out_json)

def step(state, out_json, name, ok, wall, reason, figures, log):
    s = {"name": name, "ok": ok == "1", "wall_s": round(float(wall), 1)}
    if reason:
        s["reason"] = reason
        if reason.startswith("skipped"):
            s["skipped"] = True
    fig = load_json(figures) if figures else None
    if fig is not None:
        s["figures"] = fig
    if log:
        s["log"] = log
    with open(os.path.join(state, "steps.jsonl"), "a") as f:
        f.write(json.dumps(s) + "\n")
    write_out(state, out_json)

def reason(log, kind):
    """One line saying why a step failed, from its log."""
    text = read(log)
    lines = [l.rstrip() for l in text.splitlines()]
    if kind == "configure":
        for i, l in enumerate(lines):
            if l.startswith("CMake Error"):
                msg = []  # the message: the indented lines up to "Call Stack" or the next unindented one
                for x in lines[i + 1:]:
                    if x.startswith("Call Stack") or (x and not x.startswith(" ")):
                        break
                    if x.strip():
                        msg.append(x.strip())
                return (" ".join(msg) or l)[:400]
    if kind == "build":
        for l in lines:
            if re.search(r"\berror\b:", l) or "undefined reference" in l:
                return l.strip()[:400]
        for l in lines:
            if l.startswith("FAILED:"):
                return l.strip()[:400]
    if re.search(r"out of memory", text, re.I):
        m = re.search(r"^.*out of memory.*$", text, re.I | re.M)
        return ("out of memory: " + m.group(0).strip())[:400]
    for l in reversed(lines):
        if re.search(r"error", l, re.I):
            return l.strip()[:400]
    tail = [l for l in lines if l.strip()]
    return tail[-1].strip()[:400] if tail else "no output"

def ctest(log, junit):
    """Counts and one line per test: from ctest's JUnit file, else its log."""
    import xml.etree.ElementTree as ET
    text = read(log)
    fig = {}
    m = re.search(r"(\d+)% tests passed, (\d+) tests? failed out of (\d+)", text)
    if m:
        failed, total = int(m.group(2)), int(m.group(3))
        skipped = len(re.findall(r"\(Skipped\)", text))
        fig.update(total=total, failed=failed, skipped=skipped, passed=total - failed - skipped)
    elif "No tests were found" in text:
        fig.update(total=0, failed=0, skipped=0, passed=0)
    try:
        cases = ET.parse(junit).getroot().iter("testcase")
    except (OSError, ET.ParseError):
        cases = []
    tests = []
    for c in cases:
        out = c.findtext("system-out") or ""
        status = {"run": "passed", "fail": "failed", "notrun": "skipped"}.get(c.get("status"), c.get("status"))
        t = {"name": c.get("name"), "status": status, "time_s": round(float(c.get("time") or 0), 2)}
        m = re.search(r": Skipped\n(.*)", out)
        if status == "skipped" and m:
            t["reason"] = m.group(1).strip()
        if status == "failed":
            fails = [l for l in out.splitlines() if "Failure" in l or "error" in l.lower()]
            if fails:
                t["reason"] = fails[0].strip()[:300]
        tests.append(t)
    fig["tests"] = tests
    fig["skip_reasons"] = sorted({t["reason"] for t in tests if t["status"] == "skipped" and "reason" in t})
    print(json.dumps(fig))

def train(run_dir, log):
    text = read(log)
    for name in ("launcher.log", "encoder.log", "decoder.log"):
        text += read(os.path.join(run_dir, name))
    fig = {"out_of_memory": bool(re.search(r"out of memory", text, re.I))}
    summary = load_json(os.path.join(run_dir, "summary.json"))
    if summary:
        for k in ("mode", "steps", "final_loss", "wall_s", "samples_per_s", "peak_device_bytes",
                  "peak_rss_bytes", "peak_tensor_bytes", "peak_device_tensor_bytes",
                  "peak_reserved_bytes", "param_digest"):
            if k in summary:
                fig[k] = summary[k]
    steps = []
    for l in read(os.path.join(run_dir, "metrics.jsonl")).splitlines():
        try:
            steps.append(json.loads(l)["step_s"])
        except (ValueError, KeyError):
            pass
    if steps:
        fig["step_s"] = [round(s, 4) for s in steps]
        fig["median_step_s_after_first"] = round(statistics.median(steps[1:] or steps), 4)
    print(json.dumps(fig))

def last_json(path):
    for l in reversed(read(path).splitlines()):
        try:
            doc = json.loads(l)
        except ValueError:
            continue
        if isinstance(doc, dict):
            return doc
    return None

def bench(out_file):
    """The bench's JSON object: the last line of its output that parses."""
    print(json.dumps(last_json(out_file)))

def plan(fp32, bf16, fp16):
    print(json.dumps({"fp32": last_json(fp32), "bf16": last_json(bf16), "fp16": last_json(fp16)}))

# The runs on the plan's config and the plan row each trains (as gpu-report.py's PLAN_ROWS).
RESERVE_RUNS = {"train_single_fp32": "single-process", "train_pipeline_fp32": "pipeline recompute",
                "train_single_bf16": "single-process", "train_pipeline_bf16": "pipeline recompute",
                "train_single_fp16": "single-process", "train_pipeline_fp16": "pipeline recompute",
                "train_single_offload_fp32": "single-process offload",
                "train_pipeline_offload_fp32": "pipeline offload"}

def reserve(state, device):
    """Per way: the caching allocator's peak reserved bytes against its peak
    allocated (tensor) bytes against plan's prediction (its tensor bytes, its
    allowance for the reserve, what it says the way needs), so the allowance's
    default (card_budget.h) can be replaced by the measured fraction. Reserved
    is each process's peak summed: an upper bound where the stages' peaks
    fall in different turns."""
    rows = []
    for run, way in RESERVE_RUNS.items():
        fig = load_json(os.path.join(state, run + ".json")) or {}
        allocated = sum((fig.get("peak_device_tensor_bytes") or {}).values()) or None
        reserved = sum((fig.get("peak_reserved_bytes") or {}).values()) or None
        plan = last_json(os.path.join(state, "plan-" + run.rsplit("_", 1)[1] + ".json")) or {}
        row = next((r for r in plan.get("rows") or [] if r.get("name") == way), {})
        if allocated is None and not row:
            continue
        rows.append({
            "run": run, "way": way, "out_of_memory": fig.get("out_of_memory"),
            "allocated_bytes": allocated, "reserved_bytes": reserved,
            "reserve_fraction": round(reserved / allocated - 1, 4) if reserved and allocated else None,
            "plan_tensor_bytes": row.get("tensor_bytes"), "plan_reserve_bytes": row.get("reserve_bytes"),
            "plan_needed_bytes": row.get("needed_bytes"), "plan_fits": row.get("fits"),
            "plan_over_allocated": round(row["tensor_bytes"] / allocated, 4)
                                   if allocated and row.get("tensor_bytes") else None})
    plans = [last_json(os.path.join(state, f"plan-{p}.json")) or {} for p in ("fp32", "bf16", "fp16")]
    default = next((p["allowances"]["reserve_fraction"] for p in plans if p.get("allowances")), None)
    measured = [r["reserve_fraction"] for r in rows if r["reserve_fraction"] is not None]
    doc = {"device": device, "default_reserve_fraction": default, "rows": rows,
           "max_reserve_fraction": max(measured) if measured else None,
           # The allocator setting the runs had (expandable segments unless set).
           "cuda_alloc_conf": next((p["cuda_alloc_conf"] for p in plans
                                    if p.get("cuda_alloc_conf")), None)}
    if not measured:
        doc["not_measured"] = ("no run reported the caching allocator's reserved bytes "
                               "(peak_reserved_bytes is a CUDA figure)")
    print(json.dumps(doc))

if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    {"machine": machine, "step": step, "reason": lambda log, kind: print(reason(log, kind)),
     "ctest": ctest, "train": train, "bench": bench, "plan": plan, "reserve": reserve,
     "write": write_out}[cmd](*args)
PY
}

# Seconds left of the run's budget for a step that asks for $1 (0: none left).
step_limit() {
  local left=$((DEADLINE - SECONDS))
  if [ "$left" -lt 10 ]; then echo 0; elif [ "$1" -lt "$left" ]; then echo "$1"; else echo "$left"; fi
}

# timed LOG LIMIT CMD...: runs CMD under `timeout` into LOG; sets RC and WALL.
timed() {
  local log=$1 limit=$2 t0
  shift 2
  t0=$(date +%s.%N)
  RC=0
  timeout --kill-after=15 "$limit" "$@" >"$log" 2>&1 </dev/null || RC=$?
  WALL=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
  if [ "$RC" -eq 124 ] || [ "$RC" -eq 137 ]; then echo "gpu-check: timed out after $limit s" >>"$log"; fi
}

# record NAME OK(1|0) WALL REASON [FIGURES_FILE] [LOG]
record() {
  local log_rel=""
  [ -n "${6:-}" ] && log_rel="logs/$(basename "$6")"
  python3 "$HELPER" step "$STATE" "$OUT_JSON" "$1" "$2" "$3" "$4" "${5:-}" "$log_rel"
  if [ "$2" = 1 ]; then say "$1: ok ($3 s)"; else say "$1: FAILED ($3 s): $4"; fi
  # Everything small of the work folder (logs, run summaries; no checkpoints), after every step.
  if tar -czf "$OUT_DIR/logs.tar.gz.tmp" -C "$WORK" --exclude=checkpoints --exclude='*.pt' logs runs 2>/dev/null; then
    mv "$OUT_DIR/logs.tar.gz.tmp" "$OUT_DIR/logs.tar.gz"
  fi
}

# Why a step failed: timeout, or a line from its log.
failure_reason() {  # LOG KIND LIMIT
  if [ "$RC" -eq 124 ] || [ "$RC" -eq 137 ]; then echo "timed out after $3 s"; return; fi
  echo "exit $RC: $(python3 "$HELPER" reason "$1" "$2")"
}

# skip_or_limit NAME WANTED: sets LIMIT (seconds for the step), or records NAME
# as skipped (an earlier failure blocks it, or the budget is spent) and fails.
skip_or_limit() {
  if [ -n "$BLOCKED" ]; then record "$1" 0 0 "skipped: $BLOCKED"; return 1; fi
  LIMIT=$(step_limit "$2")
  if [ "$LIMIT" -eq 0 ]; then
    record "$1" 0 0 "skipped: out of time (UP_GPU_CHECK_BUDGET_S=$BUDGET_S)"
    return 1
  fi
}

step_unpack() {
  local t0=$SECONDS manifest="$DEBS_DIR/MANIFEST" fig="$STATE/unpack.json" log="$LOGS/unpack.log"
  : >"$log"
  if [ ! -f "$manifest" ]; then
    record unpack 0 0 "no .debs/MANIFEST: run scripts/gpu-check.sh fetch where apt works and carry .debs/" "" "$log"
    return
  fi
  if cmp -s "$manifest" "$PREFIX/.manifest" 2>/dev/null; then
    echo "prefix is up to date with .debs/MANIFEST" >>"$log"
  else
    rm -rf "$PREFIX" && mkdir -p "$PREFIX"
    local pkg file size err=""
    while read -r pkg file size; do
      if [ ! -f "$DEBS_DIR/$file" ]; then err="missing .debs/$file ($pkg)"; break; fi
      if command -v dpkg-deb >/dev/null; then
        dpkg-deb -x "$DEBS_DIR/$file" "$PREFIX" >>"$log" 2>&1 || { err="dpkg-deb -x $file failed"; break; }
      else  # no dpkg: a .deb is an ar archive holding data.tar.*
        local data
        data=$(ar t "$DEBS_DIR/$file" | grep '^data\.tar') || { err="$file holds no data.tar"; break; }
        ar p "$DEBS_DIR/$file" "$data" | tar -xa -f - -C "$PREFIX" >>"$log" 2>&1 ||
          { err="unpacking $file (ar/tar) failed"; break; }
      fi
    done <"$manifest"
    if [ -n "$err" ]; then
      record unpack 0 "$((SECONDS - t0))" "$err" "" "$log"
      return
    fi
    # Absolute symlinks (libz.so -> /lib/.../libz.so.1.2.13) point into the prefix.
    local link target
    while IFS= read -r link; do
      target=$(readlink "$link")
      case "$target" in
        /*) if [ -e "$PREFIX$target" ]; then ln -sfn "$PREFIX$target" "$link"; echo "relinked $link -> $PREFIX$target" >>"$log"; fi ;;
      esac
    done < <(find "$PREFIX" -type l)
    cp "$manifest" "$PREFIX/.manifest"
  fi
  local dangling
  dangling=$(find "$PREFIX" -xtype l | wc -l)
  awk -v n="$(wc -l <"$manifest")" -v d="$dangling" '{s += $3} END {
      printf "{\"debs\": %d, \"deb_mib\": %.1f, \"dangling_symlinks\": %d}\n", n, s / 1048576, d}' \
    "$manifest" >"$fig"
  record unpack 1 "$((SECONDS - t0))" "" "$fig" "$log"
}

step_configure() {
  local log="$LOGS/configure.log" gen=() torch_dir="" torch_arg=()
  skip_or_limit configure 180 || { BLOCKED="build failed (configure skipped)"; return 0; }
  # The LibTorch of python3's torch; without one, cmake/FindLibTorch.cmake searches itself.
  torch_dir="$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null | tail -n 1)" || true
  if [ -n "$torch_dir" ]; then
    torch_dir="$torch_dir/Torch"
    torch_arg=(-DTorch_DIR="$torch_dir")
  else
    torch_dir="(python3 cannot import torch: left to cmake/FindLibTorch.cmake)"
  fi
  command -v ninja >/dev/null && gen=(-G Ninja)
  # A build folder made by another generator cannot be reconfigured with Ninja.
  if [ -f "$BUILD_DIR/CMakeCache.txt" ] && ! grep -q "^CMAKE_GENERATOR:INTERNAL=${gen[1]:-Unix Makefiles}$" "$BUILD_DIR/CMakeCache.txt"; then
    rm -rf "$BUILD_DIR"
  fi
  # Configure afresh, as on a new machine: no find result cached from an
  # earlier prefix (the objects stay, so an unchanged build is not redone).
  rm -f "$BUILD_DIR/CMakeCache.txt"
  local lib="$PREFIX/usr/lib/$ARCH_TRIPLET"
  timed "$log" "$LIMIT" cmake -S . -B "$BUILD_DIR" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DUP_WERROR=OFF "${torch_arg[@]}" \
    -DCMAKE_PREFIX_PATH="$PREFIX/usr;$lib/cmake;$PREFIX/usr/share/cmake" \
    -DCMAKE_LIBRARY_PATH="$lib;$PREFIX/lib/$ARCH_TRIPLET" \
    -DCMAKE_INCLUDE_PATH="$PREFIX/usr/include" \
    -DCMAKE_CXX_FLAGS="-isystem $PREFIX/usr/include"
  printf '{"generator": "%s", "torch_dir": "%s", "libtorch": "%s"}\n' "${gen[1]:-Unix Makefiles}" "$torch_dir" \
    "$(grep -o 'LibTorch [^ ]* at [^ ]* (CUDA: [A-Za-z0-9]*)' "$log" | head -n 1)" >"$STATE/configure.json"
  if [ "$RC" -eq 0 ]; then
    record configure 1 "$WALL" "" "$STATE/configure.json" "$log"
  else
    BLOCKED="build failed (configure failed)"
    record configure 0 "$WALL" "$(failure_reason "$log" configure "$LIMIT")" "$STATE/configure.json" "$log"
  fi
}

# step_build NAME WANTED_LIMIT [TARGET...]: builds TARGET... (all without) on every core.
step_build() {
  local name=$1 want=$2 log="$LOGS/$1.log" args=(--build "$BUILD_DIR" -j "$(nproc)")
  shift 2
  [ $# -gt 0 ] && args+=(--target "$@")
  skip_or_limit "$name" "$want" || { [ "$name" = build ] && BLOCKED="build failed"; return 0; }
  timed "$log" "$LIMIT" cmake "${args[@]}"
  local ccache=false
  command -v ccache >/dev/null && ccache=true
  printf '{"jobs": %d, "targets": "%s", "ccache": %s}\n' "$(nproc)" "${*:-all}" "$ccache" >"$STATE/$name.json"
  if [ "$RC" -eq 0 ]; then
    record "$name" 1 "$WALL" "" "$STATE/$name.json" "$log"
  else
    [ "$name" = build ] && BLOCKED="build failed"
    record "$name" 0 "$WALL" "$(failure_reason "$log" build "$LIMIT")" "$STATE/$name.json" "$log"
  fi
}

# Every binary built here lists libstdc++ ahead of LibTorch (2.11's libtorch.so
# exports a copy of std::filesystem that would take our calls otherwise).
step_libstdcxx_order() {
  local log="$LOGS/libstdcxx-order.log"
  skip_or_limit libstdcxx_order 20 || return 0
  timed "$log" "$LIMIT" python3 tests/tree/check_needed.py "$BUILD_DIR/bin"
  if [ "$RC" -eq 0 ]; then
    record libstdcxx_order 1 "$WALL" "" "" "$log"
  else
    record libstdcxx_order 0 "$WALL" "$(failure_reason "$log" ctest "$LIMIT")" "" "$log"
  fi
}

step_gpu_tests() {
  local log="$LOGS/gpu-tests.log"
  skip_or_limit gpu_tests 240 || return 0
  timed "$log" "$LIMIT" ctest --test-dir "$BUILD_DIR" -L gpu --output-on-failure --timeout 90 \
    --output-junit "$LOGS/gpu-tests.xml"
  python3 "$HELPER" ctest "$log" "$LOGS/gpu-tests.xml" >"$STATE/ctest.json"
  if [ "$RC" -eq 0 ] && ! grep -q "No tests were found" "$log"; then
    record gpu_tests 1 "$WALL" "" "$STATE/ctest.json" "$log"
  elif [ "$RC" -eq 0 ]; then
    record gpu_tests 0 "$WALL" "no test has the label gpu" "$STATE/ctest.json" "$log"
  else
    record gpu_tests 0 "$WALL" "$(failure_reason "$log" ctest "$LIMIT")" "$STATE/ctest.json" "$log"
  fi
}

step_plan() {
  skip_or_limit plan 60 || return 0
  local t0=$SECONDS ok=1 why="" prec
  for prec in fp32 bf16 fp16; do
    timed "$LOGS/plan-$prec.txt" "$LIMIT" "$BIN" plan --config "$TRAIN_CONFIG" --gpu-mem 16GiB --set "train.precision=$prec" --no-measure
    [ "$RC" -eq 0 ] || { ok=0; why="plan ($prec): $(failure_reason "$LOGS/plan-$prec.txt" plan "$LIMIT")"; }
    timed "$STATE/plan-$prec.json" "$LIMIT" "$BIN" plan --config "$TRAIN_CONFIG" --gpu-mem 16GiB --set "train.precision=$prec" --json --no-measure
    [ "$RC" -eq 0 ] || { ok=0; why="plan --json ($prec): $(failure_reason "$STATE/plan-$prec.json" plan "$LIMIT")"; }
  done
  python3 "$HELPER" plan "$STATE/plan-fp32.json" "$STATE/plan-bf16.json" "$STATE/plan-fp16.json" >"$STATE/plan.json"
  record plan "$ok" "$((SECONDS - t0))" "$why" "$STATE/plan.json" "$LOGS/plan-fp32.txt"
}

# Per way, the caching allocator's reserved bytes against its allocated bytes
# against plan's prediction (the train steps' figures and plan's rows): what
# turns plan's default reserve allowance into a measured one. Without CUDA
# there are no reserved bytes: it says so and records the rest.
step_allocator_reserve() {
  skip_or_limit allocator_reserve 20 || return 0
  local t0=$SECONDS fig="$STATE/allocator-reserve.json" why=""
  if ! python3 "$HELPER" reserve "$STATE" "$1" >"$fig"; then
    record allocator_reserve 0 "$((SECONDS - t0))" "the helper's reserve failed on $STATE"
    return 0
  fi
  why=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get("not_measured", ""))' "$fig") || true
  if [ -n "$why" ]; then say "allocator_reserve: reserved bytes not measured on $1: $why"; fi
  record allocator_reserve 1 "$((SECONDS - t0))" "" "$fig"
}

# step_train NAME PRECISION single|pipeline [SET...]: SETs (k=v) come last.
step_train() {
  local name=$1 prec=$2 kind=$3
  shift 3
  skip_or_limit "$name" "$LIMIT_TRAIN" || return 0
  local run="$WORK/runs/$name" log="$LOGS/$name.log" args=()
  rm -rf "$run"
  args=(train --config "$TRAIN_CONFIG" --out "$run" --set train.steps=3 --set checkpoint.every=0
        --set "train.precision=$prec" "${TRAIN_SETS[@]}" "${BUDGET_ARGS[@]}")
  if [ "$kind" = single ]; then args+=(--single-process); else args+=(--set pipeline.activations=recompute); fi
  local set
  for set in "$@"; do args+=(--set "$set"); done
  timed "$log" "$LIMIT" env "${BUDGET_ENV[@]}" "$BIN" "${args[@]}"
  python3 "$HELPER" train "$run" "$log" >"$STATE/$name.json"
  if [ "$RC" -eq 0 ]; then
    record "$name" 1 "$WALL" "" "$STATE/$name.json" "$log"
  elif [ "$kind" = single ] && grep -q '"out_of_memory": true' "$STATE/$name.json" && [ "$RC" -ne 124 ] && [ "$RC" -ne 137 ]; then
    # Expected where the plan says it does not fit: the answer is "out of memory".
    record "$name" 1 "$WALL" "" "$STATE/$name.json" "$log"
  else
    record "$name" 0 "$WALL" "$(failure_reason "$log" train "$LIMIT")" "$STATE/$name.json" "$log"
  fi
}

step_bench() {  # NAME WANTED_LIMIT ARGS...
  local name=$1 want=$2
  shift 2
  skip_or_limit "$name" "$want" || return 0
  local out="$LOGS/$name.json" log="$LOGS/$name.log" t0
  t0=$(date +%s.%N)
  RC=0
  timeout --kill-after=15 "$LIMIT" "$BIN" bench "$@" --json >"$out" 2>"$log" </dev/null || RC=$?
  WALL=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
  python3 "$HELPER" bench "$out" >"$STATE/$name.json"
  if [ "$RC" -eq 0 ] && [ "$(cat "$STATE/$name.json")" != null ]; then
    record "$name" 1 "$WALL" "" "$STATE/$name.json" "$log"
  else
    [ "$RC" -eq 0 ] && RC=1
    record "$name" 0 "$WALL" "$(failure_reason "$log" bench "$LIMIT")" "$STATE/$name.json" "$log"
  fi
}

run_check() {
  OUT_DIR="${OUT:-gpu-results}"
  mkdir -p "$OUT_DIR"
  OUT_DIR="$(cd "$OUT_DIR" && pwd)"
  OUT_JSON="$OUT_DIR/gpu-check.json"
  local device="${UP_GPU_CHECK_DEVICE:-cuda}"
  case "$device" in cuda | cpu) ;; *) die "UP_GPU_CHECK_DEVICE=$device: use cuda or cpu" ;; esac
  BUILD_DIR="${UP_GPU_BUILD_DIR:-build-gpu}"
  PREFIX="$(mkdir -p "${UP_GPU_PREFIX:-.gpu-prefix}" && cd "${UP_GPU_PREFIX:-.gpu-prefix}" && pwd)"
  BUDGET_S="${UP_GPU_CHECK_BUDGET_S:-450}"
  DEADLINE=$((SECONDS + BUDGET_S))
  LIMIT_BUILD="${UP_GPU_CHECK_BUILD_S:-300}"
  LIMIT_TRAIN="${UP_GPU_CHECK_TRAIN_S:-75}"
  local targets
  read -r -a targets <<<"${UP_GPU_CHECK_TARGETS:-unet-pipeline encoder_proc decoder_proc gpu_test cuda_test}"
  local build_all="${UP_GPU_CHECK_BUILD_ALL:-1}"
  WORK="$ROOT/$BUILD_DIR-check"
  [[ "$BUILD_DIR" = /* ]] && WORK="$BUILD_DIR-check"
  rm -rf "$WORK" && mkdir -p "$WORK/logs" "$WORK/runs" "$WORK/state"
  LOGS="$WORK/logs"
  STATE="$WORK/state"
  HELPER="$WORK/gpu_check_helper.py"
  BIN="$BUILD_DIR/bin/unet-pipeline"
  BLOCKED=""
  rm -f "$OUT_JSON" "$OUT_DIR/logs.tar.gz"
  command -v python3 >/dev/null || die "run needs python3 (with torch: its LibTorch is what we build against)"
  write_helper "$HELPER"

  local mode=gpu
  [ "$device" = cpu ] && mode="${UP_GPU_CHECK_MODE:-rehearse}"
  say "machine: $(python3 "$HELPER" machine "$STATE" "$mode" "$device")"
  python3 "$HELPER" write "$STATE" "$OUT_JSON"

  step_unpack
  # Binaries (and the build's test discovery) find the prefix's libraries;
  # libspdlog's own libfmt is no direct dependency, so RPATH alone misses it.
  export LD_LIBRARY_PATH="$PREFIX/usr/lib/$ARCH_TRIPLET:$PREFIX/lib/$ARCH_TRIPLET${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  step_configure
  step_build build "$LIMIT_BUILD" "${targets[@]}"
  step_libstdcxx_order
  step_gpu_tests

  # Training: brats16g on the GPU, tiny on CPU; a 16 GiB budget per process.
  if [ "$device" = cuda ]; then
    TRAIN_CONFIG=configs/brats16g.yaml
    TRAIN_SETS=()
  else
    TRAIN_CONFIG=configs/tiny.yaml
    TRAIN_SETS=(--set pipeline.stages.encoder.device=cpu --set pipeline.stages.decoder.device=cpu)
  fi
  BUDGET_ARGS=()
  BUDGET_ENV=(UP_DEVICE_MEMORY_CAP_GIB=16)
  local via="env UP_DEVICE_MEMORY_CAP_GIB=16"
  if [ -z "$BLOCKED" ] && { "$BIN" train --help 2>/dev/null | grep -q memory_budget ||
                            grep -q 'train\.memory_budget' docs/CONFIG.md; }; then
    BUDGET_ARGS=(--set train.memory_budget=16GiB)
    BUDGET_ENV=()
    via="--set train.memory_budget=16GiB"
  fi
  say "memory budget: $via"
  printf '{"memory_budget": {"bytes": %d, "via": "%s"}}\n' $((16 << 30)) "$via" >"$STATE/budget.json"
  step_plan
  step_train train_single_fp32 fp32 single
  step_train train_pipeline_fp32 fp32 pipeline
  step_train train_single_bf16 bf16 single
  step_train train_pipeline_bf16 bf16 pipeline
  # Four stages (each half in two parts) taking turns on the one card.
  step_train train_pipeline_parts4_bf16 bf16 pipeline pipeline.encoder_parts=2 pipeline.decoder_parts=2
  # Replicas: two copies of the pipeline, replica 1 on the next device (a
  # second GPU; both on the CPU in the rehearsal). One GPU cannot hold them.
  local gpus=0
  [ "$device" = cuda ] && gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
  if [ "$device" != cuda ] || [ "${gpus:-0}" -ge 2 ]; then
    step_train train_pipeline_replicas2_bf16 bf16 pipeline pipeline.replicas=2 \
      train.micro_batches=1
  else
    say "train_pipeline_replicas2_bf16: not run: this machine has ${gpus:-0} GPU (replica 1 needs a second)"
  fi
  step_train train_single_fp16 fp16 single
  step_train train_pipeline_fp16 fp16 pipeline
  # The one-card ways that hold only the turn: recompute by blocks with the
  # kept inputs parked in pinned host memory, against one process doing the
  # same (checkpointing by blocks, offloaded).
  step_train train_single_offload_fp32 fp32 single train.checkpointing=blocks train.offload=on
  step_train train_pipeline_offload_fp32 fp32 pipeline pipeline.recompute_unit=block pipeline.offload=on
  step_allocator_reserve "$device"

  if [ "$device" = cuda ]; then
    step_bench bench_transport 90 transport --max-bytes 268435456 --repeats 2 --seconds 0.2
    # (with its lean group: three ways as written against model.memory: lean,
    # whose norm backward on a card is tensor ops, not the CPU's fused loop)
    step_bench bench_step 200 step --config configs/small.yaml --steps 6 --rounds 1 --warmup 2 \
      --set pipeline.stages.encoder.device=cuda --set pipeline.stages.decoder.device=cuda
    # Capacity on the card under train.memory_budget, with a short search
    # (level 0's width from 8 up to 16 at most): the budget's CUDA path for real.
    step_bench bench_capacity 150 capacity --config configs/tiny.yaml --budget 96MiB --steps 1 \
      --max-scale 16 --set pipeline.stages.encoder.device=cuda \
      --set pipeline.stages.decoder.device=cuda
  else
    step_bench bench_transport 60 transport --max-bytes 16777216 --repeats 1 --seconds 0.05
    step_bench bench_step 150 step --config configs/tiny.yaml --steps 4 --rounds 1 --warmup 1
  fi
  # nnU-Net's ResEnc L plan (102M parameters) through the pipeline under the
  # budget, with recompute (the tiny test plan on CPU).
  if [ "$device" = cuda ]; then
    TRAIN_CONFIG=configs/nnunet-resenc-l.yaml
    TRAIN_SETS=(--set train.steps=2 --set pipeline.stages.encoder.device=cuda
                --set pipeline.stages.decoder.device=cuda)
  else
    TRAIN_CONFIG=tests/data/nnunet/empty.yaml
    TRAIN_SETS+=(--set model.kind=nnunet --set model.plans=configs/nnunet/tiny_plans.json
                 --set model.configuration=3d_fullres --set model.in_channels=2
                 --set model.num_classes=3)
  fi
  step_train train_pipeline_nnunet_bf16 bf16 pipeline
  step_train train_pipeline_nnunet_offload_bf16 bf16 pipeline pipeline.recompute_unit=block pipeline.offload=on
  # Your own U-Net through TorchScript: scripts/unet_reference.py's U-Net as a
  # bundle that scripts/export_unet.py writes with this machine's torch,
  # trained by the pipeline (the loader, the scripted levels on the device).
  local bundle="$WORK/runs/torchscript-bundle"
  rm -rf "$bundle"
  timeout 120 python3 scripts/export_unet.py unet_reference:UNet \
    --kwargs '{"dims": 2, "in_channels": 4, "num_classes": 3, "features": [16, 32, 64, 128]}' \
    --example 1x4x128x128 --out "$bundle" >"$LOGS/export_unet.log" 2>&1 || true
  TRAIN_CONFIG=tests/data/nnunet/empty.yaml
  # On the CPU rehearsal a quarter of the patch: bf16 on a CPU is emulated,
  # and recomputing every level through the interpreter takes minutes at 128.
  local ts_size=128
  [ "$device" = cuda ] || ts_size=64
  TRAIN_SETS=(--set model.kind=torchscript --set "model.path=$bundle" --set "data.size=$ts_size"
              --set train.steps=2)
  [ "$device" = cuda ] && TRAIN_SETS+=(--set pipeline.stages.encoder.device=cuda
                                       --set pipeline.stages.decoder.device=cuda)
  step_train train_pipeline_torchscript_bf16 bf16 pipeline
  # Last, with what time is left: every other target (the remaining tests), so
  # a slow full build cannot crowd out the steps above.
  [ "$build_all" = 1 ] && step_build build_all 300
  say "wrote $OUT_JSON and $OUT_DIR/logs.tar.gz"
  python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); sys.exit(0 if d["ok"] else 1)' "$OUT_JSON" ||
    { say "failed steps: $(python3 -c 'import json, sys; print(" ".join(json.load(open(sys.argv[1]))["failed"]))' "$OUT_JSON")"; return 1; }
}

# --------------------------------------------------------------- rehearse --
skip() { say "rehearse skipped: $*"; exit 0; }

rehearse() {
  local rdir="$ROOT/build-rehearse"
  [ "$(id -u)" -eq 0 ] || skip "needs root (a private mount namespace and an overlay over /usr)"
  command -v unshare >/dev/null || skip "no unshare (util-linux)"
  if ! command -v apt-get >/dev/null || ! command -v dpkg-query >/dev/null; then
    skip "no apt/dpkg: not a Debian machine"
  fi
  if ! .venv/bin/python3 -c 'import torch' 2>/dev/null; then
    skip "no torch in .venv (run scripts/install-deps.sh)"
  fi
  mkdir -p "$rdir"
  local probe="$rdir/probe"
  rm -rf "$probe" && mkdir -p "$probe/low" "$probe/mnt"
  unshare --mount --propagation private true 2>/dev/null || skip "unshare --mount is not permitted here"
  unshare --mount --propagation private \
      mount -t overlay overlay -o "ro,lowerdir=$probe/low:/usr/include" "$probe/mnt" 2>/dev/null ||
    skip "overlayfs cannot be mounted in a private mount namespace here"
  rm -rf "$probe"

  fetch
  local start=$SECONDS layer="$rdir/hide"
  say "rehearse: hiding every package a GPU machine would not have"
  local hidden_list="$rdir/hidden-packages.txt"
  local essential
  mapfile -t essential < <(dpkg-query -W -f='${db:Status-Abbrev} ${Package} ${Essential} ${Priority}\n' |
                           awk '$1 == "ii" && ($3 == "yes" || $4 == "required") {print $2}')
  closure_of -i "${REHEARSE_HOST_PACKAGES[@]}" "${BASE_PACKAGES[@]}" "${essential[@]}" |
    sort -u >"$rdir/host-packages.txt"
  dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' | awk '$1 == "ii" {sub(/:.*/, "", $2); print $2}' |
    sort -u | comm -23 - "$rdir/host-packages.txt" >"$hidden_list"
  /usr/bin/python3 - "$layer" "$hidden_list" "$rdir/host-packages.txt" "$rdir/rehearsal.json" <<'PY'
"""Builds an overlay layer of whiteouts for /usr: every file of a hidden
package under include/, lib/, share/cmake*/ or share/pkgconfig/, a directory
at once when nothing visible is left in it."""
import json, os, shutil, subprocess, sys
layer, hidden_file, host_file, info_file = sys.argv[1:5]
hidden_pkgs = open(hidden_file).read().split()
host_pkgs = open(host_file).read().split()

def files_of(pkgs):
    if not pkgs:
        return set()
    out = subprocess.run(["dpkg-query", "-L", *pkgs], capture_output=True, text=True).stdout
    paths = set()
    for p in out.splitlines():
        if not p.startswith("/"):
            continue  # "package diverts others to: ..." and the like
        canon = os.path.join(os.path.realpath(os.path.dirname(p)), os.path.basename(p))
        if os.path.islink(canon) or os.path.isfile(canon):
            paths.add(canon)
    return paths

def wanted(p):  # under /usr/include, /usr/lib*, /usr/share/cmake*, /usr/share/pkgconfig
    parts = os.path.relpath(p, "/usr").split("/")
    return len(parts) > 1 and (parts[0] == "include" or parts[0].startswith("lib") or
                               (len(parts) > 2 and parts[0] == "share" and
                                (parts[1].startswith("cmake") or parts[1] == "pkgconfig")))

hide = {p for p in files_of(hidden_pkgs) if p.startswith("/usr/") and wanted(p)} - files_of(host_pkgs)
dirs = {}
for p in hide:
    d = os.path.dirname(p)
    while d != "/usr" and d not in dirs:
        dirs[d] = None
        d = os.path.dirname(d)
memo = {}
def all_hidden(d):  # nothing visible left in directory d
    if d not in memo:
        try:
            entries = [os.path.join(d, e) for e in os.listdir(d)]
        except OSError:
            entries = []
        memo[d] = bool(entries) and all(
            (e in hide) if not (os.path.isdir(e) and not os.path.islink(e)) else (e in dirs and all_hidden(e))
            for e in entries)
    return memo[d]
whiteouts = set()
for p in hide:  # the highest fully hidden ancestor, else the file itself
    top, d = p, os.path.dirname(p)
    while d != "/usr" and all_hidden(d):
        top, d = d, os.path.dirname(d)
    whiteouts.add(top)
shutil.rmtree(layer, ignore_errors=True)
for w in sorted(whiteouts):
    target = os.path.join(layer, os.path.relpath(w, "/usr"))
    os.makedirs(os.path.dirname(target), exist_ok=True)
    if not os.path.lexists(target):
        os.mknod(target, 0o600 | 0o020000, os.makedev(0, 0))  # an overlayfs whiteout
with open(os.path.join(os.path.dirname(layer), "hidden-paths.txt"), "w") as f:
    f.write("\n".join(sorted(hide)) + "\n")
info = {"rehearsal": {"hidden_packages": len(hidden_pkgs), "hidden_files": len(hide),
                      "whiteouts": len(whiteouts), "host_packages": len(host_pkgs)}}
json.dump(info, open(info_file, "w"))
print(f"gpu-check: rehearse: {len(hidden_pkgs)} packages hidden ({len(hide)} files, "
      f"{len(whiteouts)} whiteouts); {len(host_pkgs)} stay (compiler, CMake, ninja, ccache, Python, base)")
PY
  local out="${OUT:-build-rehearse/out}" rc=0
  UP_GPU_CHECK_EXTRA_JSON="$rdir/rehearsal.json" \
    unshare --mount --propagation private "$BASH" "$0" __inside "$layer" "$rdir/hidden-paths.txt" "$out" || rc=$?
  say "rehearse: $((SECONDS - start)) s after fetch, exit $rc"
  if [ -f "$out/gpu-check.json" ]; then
    /usr/bin/python3 scripts/gpu-report.py --check "$out/gpu-check.json" || rc=1
  fi
  return "$rc"
}

# Inside the private mount namespace: hide, check the hiding, then `run` on CPU.
inside() {
  local layer=$1 hidden=$2 out=$3
  mount -t overlay overlay -o "ro,lowerdir=$layer:/usr" /usr || die "cannot mount the hiding overlay over /usr"
  local p n=0
  while IFS= read -r p; do
    [ -z "$p" ] && continue
    if [ -e "$p" ] || [ -L "$p" ]; then die "rehearse: $p is still visible"; fi
    n=$((n + 1))
  done <"$hidden"
  for p in /usr/include/spdlog/spdlog.h /usr/include/nifti/nifti2_io.h /usr/include/boost/version.hpp; do
    if [ -e "$p" ]; then die "rehearse: $p is still visible"; fi
  done
  say "rehearse: $n files hidden (e.g. /usr/include/spdlog/spdlog.h is gone)"
  export PATH="$ROOT/.venv/bin:$PATH"  # python3 is .venv's: its torch is the LibTorch
  export OUT="$out" UP_GPU_CHECK_DEVICE=cpu UP_GPU_CHECK_MODE=rehearse
  export UP_GPU_BUILD_DIR="${UP_GPU_BUILD_DIR:-build-rehearse/build}"
  export UP_GPU_PREFIX="${UP_GPU_PREFIX:-build-rehearse/prefix}"
  export UP_GPU_CHECK_BUILD_ALL="${UP_GPU_CHECK_BUILD_ALL:-0}"
  export UP_GPU_CHECK_BUDGET_S="${UP_GPU_CHECK_BUDGET_S:-5400}" UP_GPU_CHECK_BUILD_S="${UP_GPU_CHECK_BUILD_S:-4800}"
  export UP_GPU_CHECK_TRAIN_S="${UP_GPU_CHECK_TRAIN_S:-120}"
  run_check
}

[ $# -ge 1 ] || usage
case "$1" in
  fetch) [ $# -eq 1 ] || usage; fetch ;;
  run) [ $# -eq 1 ] || usage; run_check ;;
  rehearse) [ $# -eq 1 ] || usage; rehearse ;;
  __inside) shift; inside "$@" ;;
  *) usage ;;
esac
