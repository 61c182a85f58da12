#!/usr/bin/env python3
"""Writes docs/BENCHMARKS.md from the JSON files bench/run-all.sh saved.

usage: report.py RESULTS_DIR OUT_MD. Reads transport.json, step-tiny.json,
step-small.json, memory-small.json (and memory-small-mb1.json if present).
Every figure is printed next to its peer and the ratio; each target gets a
verdict, and a missed one the reason found when it was investigated.
"""
import json
import os
import sys

TRANSPORT_TARGET = 0.9      # ring / memcpy for messages >= 16 MiB
STEP_TARGET = 1.03          # pipeline / single-process step time
EAGER_TARGET = 1.0          # single-process / plain Python PyTorch step time
MEMORY_TARGET = 0.6         # larger stage / single-process peak RSS


GPU_BEGIN, GPU_END = "<!-- gpu-check:begin -->", "<!-- gpu-check:end -->"


def load(folder, name):
    path = os.path.join(folder, name + ".json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def size_text(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:g} {unit}"
        n /= 1024


def mib(n):
    return f"{n / 1048576:.1f}"


def verdict(ok):
    return "**met**" if ok else "**missed**"


def machine_section(runs):
    """Which machine each result file came from: the machines lent here change
    between sessions (same cores and memory, another CPU), and step times and
    even tensor bytes depend on the CPU, so a ratio is read within one run."""
    rows = [(name, d["machine"]) for name, d in runs if d and d.get("machine")]
    out = [
        "## Machine",
        "",
        "The benches ran on the CPU machines lent to this project, which change between sessions: "
        "the same 2 logical cores and 24 GiB, but not always the same CPU. Step times, and in "
        "places tensor bytes (oneDNN picks its kernels, and their workspaces, by CPU), depend on "
        "it, so every ratio here compares runs of one bench on one machine, and a figure carried "
        "over from another run says so. No GPU was visible to any of them. Each result file in "
        "`bench/results/` records its machine:",
        "",
        "| results | CPU | AVX-512 | cores | memory (GiB) | kernel | LibTorch | 1-minute load at the end |",
        "|---|---|---|---:|---:|---|---|---:|",
    ]
    for name, m in rows:
        mem = f"{m['memory_bytes'] / 2**30:.1f}" if "memory_bytes" in m else "-"
        load_1m = m.get("load_1m", "-")
        avx512 = {True: "yes", False: "no"}.get(m.get("avx512"), "not recorded")
        if m.get("onednn_max_cpu_isa"):
            avx512 += f" (oneDNN held to {m['onednn_max_cpu_isa']})"
        out.append(f"| `{name}.json` | {m['cpu_model']} | {avx512} | {m['cores']} | {mem} | "
                   f"{m['kernel']} | {m.get('torch', '-')} | {load_1m} |")
    out += [
        "",
        "`plan`'s JSON (`plan-*.json`) records no machine: its sections name the one it ran on.",
        "",
    ]
    return out


def transport_section(t):
    shm = [r for r in t["results"] if r.get("transport", "shm") == "shm"]
    gloo = [r for r in t["results"] if r.get("transport") == "gloo"]
    big = [r for r in shm if r["bytes"] >= 16 << 20]
    worst = min((r["ratio"] for r in big), default=None)
    meth = t["method"]
    out = [
        "## Transport: the shared-memory ring against memcpy",
        "",
        "`unet-pipeline bench transport`. The producer (this process, 1 torch thread) sends one "
        "float32 tensor per message with `ShmTensorSender::Send` (the one copy per byte, into the "
        f"slot); a **forked consumer process** receives the zero-copy view and releases it without "
        f"reading the payload. The ring has {meth['slots']} slots and is created (pages touched) "
        "by the parent as the launcher does; each side maps it separately as the stages do; "
        f"a warm-up of 2x{meth['slots']} messages precedes timing. **Throughput** = bytes x "
        "messages / time from the first Send to the consumer's acknowledgement of the last "
        f"(streams of about {meth['seconds_per_stream']} s, at most 20000 messages). Its peer is "
        "a single-thread `memcpy` of the same bytes from the same warmed source into as many "
        "warmed destinations as the ring has slots, timed in the same process. Ring and memcpy "
        f"streams alternate, {meth['repeats']} of each per size; the median is kept. "
        "**Latency** = median one-way time of one message of that size sent into an empty ring: "
        "from just before Send (CLOCK_MONOTONIC, one clock for both processes) to Receive "
        "returning in the consumer; it includes the copy. GB/s = 10^9 bytes/s.",
        "",
        "| size | msgs | ring GB/s | memcpy GB/s | ratio | ring latency (us) | one memcpy (us) |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in shm:
        out.append(
            f"| {size_text(r['bytes'])} | {r['messages']} | {r['gbps']:.2f} | "
            f"{r['memcpy_gbps']:.2f} | {r['ratio']:.2f} | {r['latency_us']:.1f} | "
            f"{r['memcpy_us']:.1f} |")
    out.append("")
    if worst is not None:
        out.append(f"Target: ring >= {TRANSPORT_TARGET}x memcpy for messages >= 16 MiB. Lowest "
                   f"ratio there: {worst:.2f}x: {verdict(worst >= TRANSPORT_TARGET)}.")
    else:
        out.append("Target: ring >= 0.9x memcpy for messages >= 16 MiB: not measured "
                   "(--max-bytes below 16 MiB).")
    out += [
        "",
        "Reading the table:",
        "",
        "- From 4 MiB up both sides are bound by memory bandwidth and the ring runs at memcpy "
        "speed: the slot is written once and the consumer reads it in place, so the ring costs "
        "exactly one copy per byte. A ratio a few percent above 1 is not a faster copy (the "
        "ring's copy *is* a memcpy now, see below): it is within this shared machine's "
        "run-to-run spread, where the same memcpy row moves by 10-20% between runs.",
        "- The first full run missed the target at 256 MiB (0.69x). The cause: "
        "`ShmTensorSender::Send` copied with ATen's `copy_` (plain vector stores), while glibc "
        "2.36's memcpy switches for very large blocks to a page-interleaved copy with "
        "non-temporal stores; at 256 MiB that is 1.7x faster on this CPU (checked outside the "
        "ring: memcpy 15 GB/s, `copy_` 8.7 GB/s on the same buffers). Not page faults (timed "
        "streams take none, see below) and not slot reuse (the consumer releases at once). Fix: "
        "`Send` now copies a contiguous CPU tensor with `std::memcpy` when torch runs one thread "
        "(with more threads `copy_` still splits the copy across them). The table above is "
        "after the fix.",
        "- Below 1 MiB the ring is far from memcpy, by design of its waits rather than its copy: "
        "each message pays a fixed cost (the tensor table is validated and written, `from_blob` "
        "and ATen's `copy_` dispatch, the release-store publication) of a few microseconds, and "
        "when the ring is full or empty a waiting side spins 256 times, yields 64 times, then "
        "sleeps with a backoff up to 128 us. On 2 cores shared with other work the consumer is "
        "often descheduled, so small messages move at the pace of wake-ups. Boundary tensors of "
        "the configs are 0.5-8 MiB per micro-batch (16 MiB and more for the 3-D configs), where "
        "this overhead is small; small-message throughput would need a spinning consumer on a "
        "core of its own, which the pipeline does not want on CPU stages.",
        "- Page faults: the creator touches every page (`ShmSegment::Create`) and the warm-up "
        "makes each side fault its own mapping in once, so timed streams take no faults. Without "
        "the warm-up the first pass over a slot pays one minor fault per 4 KiB page on each side.",
        "",
    ]
    if gloo:
        out += [
            "",
            "### The c10d transport (Gloo on loopback) against memcpy",
            "",
            "The same loop with `pipeline.transport: gloo`'s sender and receiver "
            "(`ipc/c10d_channel.h`): a two-rank Gloo process group on 127.0.0.1, rendezvous at a "
            "TCPStore this process serves, a 4 KiB header and one send per tensor, at most "
            f"{meth['slots']} messages in flight. Every byte crosses the kernel's TCP stack twice "
            "(send and receive copies) and the receiver gets its own tensor, so this is what the "
            "boundary costs between two machines over a network as fast as loopback, not a "
            "target to meet on one machine (use shm there).",
            "",
            "| size | msgs | gloo GB/s | memcpy GB/s | ratio | gloo latency (us) |",
            "|---:|---:|---:|---:|---:|---:|",
        ]
        for r in gloo:
            out.append(
                f"| {size_text(r['bytes'])} | {r['messages']} | {r['gbps']:.2f} | "
                f"{r['memcpy_gbps']:.2f} | {r['ratio']:.2f} | {r['latency_us']:.1f} |")
    return out


def step_section(s, title):
    rows = s["results"]
    by = {r["label"]: r for r in rows}
    pipe = by.get("pipeline")
    out = [
        f"### {title}: `{s['config']}`"
        + (" with " + ", ".join(f"`{x}`" for x in s["sets"]) if s.get("sets") else ""),
        "",
        f"{s['rounds']} runs per row of {s['steps']} steps each, the first {s['warmup']} steps of "
        f"every run dropped, {s['threads']} torch thread(s) per process; median over the pooled "
        "steps, and each run's own median to show the spread. Machine: "
        f"{s['machine']['cpu_model']}, {s['machine']['cores']} logical cores, LibTorch "
        f"{s['machine']['torch']}, 1-minute load {s['machine']['load_1m']} at the end.",
        "",
        "| row | schedule | lock | activations | median step (s) | per-run medians (s) | ratio "
        "| peak RSS, all processes (MiB) |",
        "|---|---|---|---|---:|---|---|---:|",
    ]
    for r in rows:
        if r.get("micro_batches"):
            n = r["micro_batches"]
            r = dict(r, label=f"{r['label']} ({n} micro-batch{'es' if n > 1 else ''})")
        if not r["built"]:
            out.append(f"| {r['label']} | {r.get('schedule', '-')} | {r.get('lock', '-')} | "
                       f"{r.get('activations', '-')} | - | | {r.get('note', 'not built')} | |")
            continue
        runs = ", ".join(f"{m:.4f}" for m in r["run_medians_s"])
        ratio = f"{r['ratio']:.3f}x {r['ratio_to']}" if "ratio_to" in r else "(peer)"
        rss = mib(r["peak_rss_bytes"]) if r.get("peak_rss_bytes") else "-"
        out.append(f"| {r['label']} | {r.get('schedule', '-')} | {r.get('lock', '-')} | "
                   f"{r.get('activations', '-')} | {r['median_step_s']:.4f} | {runs} | {ratio} "
                   f"| {rss} |")
    out.append("")
    ckpt, offload = by.get("single checkpointing"), by.get("pipeline offload")
    if s.get("budget_bytes") and ckpt and offload and offload.get("built") and "ratio" in offload:
        out.append(
            f"Speed at the same budget (`--budget {size_text(s['budget_bytes'])}`): the three "
            "offload rows train under that device budget, as on a card of that size, each at the "
            "fewest micro-batches that train under it (2-step probes from 1 upwards), so a way "
            "that holds less runs bigger micro-batches. Target (issue 29): the pipeline's offload "
            "way at most single-process checkpointing's step time: "
            f"{offload['ratio']:.3f}x: {verdict(offload['ratio'] <= 1.0 + 1e-9)}.")
        out.append("")
    eager = by.get("python eager")
    if eager and eager.get("built") and "ratio" in eager:
        single_over_eager = 1.0 / eager["ratio"]
        out.append(f"Target: single-process no slower than plain Python PyTorch on the same "
                   f"LibTorch, i.e. <= {EAGER_TARGET}x: {single_over_eager:.3f}x: "
                   f"{verdict(single_over_eager <= EAGER_TARGET + 1e-9)}.")
        out.append("")
    glibc_single, glibc_pipe = by.get("single glibc defaults"), by.get("pipeline glibc defaults")
    if glibc_single and glibc_pipe and pipe:
        single_row = by["single"]
        def rss_text(a, b):
            if not (a.get("peak_rss_bytes") and b.get("peak_rss_bytes")):
                return ""
            return f", peak RSS {mib(a['peak_rss_bytes'])} MiB against {mib(b['peak_rss_bytes'])} MiB"
        out.append(
            "The CPU allocator (`common/device/tensor_accounting.h`, installed by every process) "
            "keeps freed tensor blocks in the process instead of handing them back to the kernel "
            "each step (glibc's mmap and trim thresholds raised, as "
            "`GLIBC_TUNABLES=glibc.malloc.mmap_threshold=...:trim_threshold=...` would). The "
            "`glibc defaults` rows turn that off (`UP_GLIBC_MALLOC_DEFAULTS=1`): single-process "
            f"{glibc_single['median_step_s']:.4f} s against {single_row['median_step_s']:.4f} s "
            f"({glibc_single['ratio']:.3f}x){rss_text(single_row, glibc_single)}; pipeline "
            f"{glibc_pipe['median_step_s']:.4f} s against {pipe['median_step_s']:.4f} s "
            f"({glibc_pipe['ratio']:.3f}x){rss_text(pipe, glibc_pipe)} (kept blocks against "
            "blocks returned).")
        out.append("")
    if pipe:
        ok = pipe["ratio"] <= STEP_TARGET
        single = by["single"]["median_step_s"]
        out.append(f"Target: pipeline (activations keep) within 3% of single-process, i.e. "
                   f"<= {STEP_TARGET}x: {pipe['ratio']:.3f}x: {verdict(ok)}.")
        bd = s.get("pipeline_breakdown")
        if bd:
            turn_taking = bd["turn_ms"] - bd["compute_ms"] - bd["transfer_ms"]
            between = bd["step_ms"] - bd["turn_ms"]
            added = bd["transfer_ms"] + turn_taking + between
            out += [
                "",
                f"Where a pipeline step's time goes (one more pipeline run of {bd['steps']} timed "
                "steps with `--trace`, read by `bench/trace_breakdown.h`; means per step):",
                "",
                "| wall | compute (both stages) | boundary transfer | turn-taking | launcher "
                "between turns | single-process step (median above) |",
                "|---:|---:|---:|---:|---:|---:|",
                f"| {bd['step_ms']:.1f} ms | {bd['compute_ms']:.1f} ms | {bd['transfer_ms']:.1f} ms "
                f"| {turn_taking:.1f} ms | {between:.1f} ms | {single * 1e3:.1f} ms |",
                "",
                f"What the pipeline adds to a step's arithmetic (transfer, turn-taking, the "
                f"launcher between turns) is {added:.1f} ms, {100 * added / bd['step_ms']:.1f}% of "
                "its wall time. The rest of any gap to single-process is the same arithmetic "
                f"running at a different speed in two processes: here {bd['compute_ms']:.1f} ms "
                f"against {single * 1e3:.1f} ms for the whole single-process step, on a machine "
                "shared with other work.",
            ]
    out.append("")
    return out


def step_sections(tiny, small):
    out = [
        "## Step time: pipeline against single-process",
        "",
        "`unet-pipeline bench step`. Every figure is a real training run of this binary as a "
        "child process (`unet-pipeline train [--single-process] ...` into a scratch folder), read "
        "back from its `metrics.jsonl` (`step_s`: the wall time of one optimizer step, as each "
        "trainer measures it). The pipeline and the single-process trainer alternate "
        "(pipeline, single, pipeline, single, ...), then the three schedules with two unlocked "
        "stages (`pipeline.lock: off`) alternate (sequential, gpipe, 1f1b, and 1f1b with the "
        "boundary over c10d's Gloo on loopback as between two machines, ...). Same config, "
        "same `train.threads`, checkpoints off except the pipeline's final one (after the last "
        "timed step). Beside the single-process trainer, the `python eager` row is its peer in "
        "plain PyTorch on the same LibTorch: `.venv`'s Python trains the same model eagerly (the "
        "classic U-Net as `scripts/unet_reference.py`'s, a `torchscript` bundle as the unsplit "
        "model its manifest's factory builds, an nnU-Net plan as dynamic_network_architectures' "
        "network) with the same shapes, threads, loss and Adam, on random data made once "
        "(`bench/eager_step.py`, `bench/nnunet_eager.py`); its runs follow the pair's, `rounds` "
        "of them, with the same warm-up dropped. Where it cannot match the config (another loss "
        "or optimizer), the row says why instead of a figure. The `glibc defaults` rows run the "
        "trainers with `UP_GLIBC_MALLOC_DEFAULTS=1`, alternated with the rows they are compared "
        "to; the fp16 rows are timed only on a GPU (a CPU emulates fp16, about 30x slower than "
        "fp32 on tiny here). Peak RSS adds up every process of a run (`summary.json`'s "
        "`peak_rss_bytes`: the trainer, or the launcher and both stages, each holding its own "
        "LibTorch runtime), the largest over the row's runs.",
        "",
    ]
    if tiny:
        out += step_section(tiny, "tiny")
    if small:
        out += step_section(small, "small")
    out += [
        "Reading it: with the lock on, the two stages take turns, so a pipeline step does the "
        "same arithmetic as a single-process step plus one copy of each boundary tensor and its "
        "gradient, and a control message per turn. Those are small next to the convolutions, so "
        "the ratio is set by noise; a ratio below 1 can come from each process keeping its own "
        "warm caches and allocator. `pipeline recompute` runs the encoder's forward twice per "
        "micro-batch (once without a graph, once before its backward), so its ratio is what "
        "recomputation costs in time. On 2 shared "
        "cores, two unlocked stages of 1 thread each compete with each other and with the "
        "machine's other work; gpipe and 1f1b can only gain where the stages have a core (or a "
        "device) each.",
        "",
    ]
    return out


def tensor_note(m):
    """The peak tensor bytes of a memory run, as a clause ("" for older JSON)."""
    t = m.get("peak_tensor_bytes")
    if not t:
        return ""
    return (f"; peak tensor bytes: single {mib(t['trainer'])} MiB, encoder {mib(t['encoder'])}, "
            f"decoder {mib(t['decoder'])}: {m['tensor_ratio']:.2f}x "
            f"({verdict(m['tensor_ratio'] <= MEMORY_TARGET)})")


def memory_section(m, mb1, rec=None):
    rss = m["peak_rss_bytes"]
    trainer = rss["trainer"]
    rt = m["runtime_bytes"]
    out = [
        "## Memory: peak RSS per process",
        "",
        "`unet-pipeline bench memory`: one single-process run and one pipeline run of "
        f"`{m['config']}` ({m['steps']} steps; the optimizer state exists from the first), "
        "peak RSS from each run's `summary.json` (getrusage/wait4 maxrss). RSS counts the shared "
        "library pages a process touched and the ring pages it touched; the idle row is this "
        "binary running `--version`, the runtime every process pays.",
        "",
        "| process | peak RSS (MiB) | x single-process |",
        "|---|---:|---:|",
        f"| single-process trainer | {mib(trainer)} | 1.00 |",
    ]
    for who in ("encoder", "decoder", "launcher"):
        out.append(f"| {who} | {mib(rss[who])} | {rss[who] / trainer:.2f} |")
    out.append(f"| idle process (LibTorch runtime) | {mib(rt)} | {rt / trainer:.2f} |")
    tensors = m.get("peak_tensor_bytes")
    if tensors:
        tt = tensors["trainer"]
        out += [
            "",
            "Peak tensor bytes, measured by each process's counting CPU allocator "
            "(`common/device/tensor_accounting.h`: every tensor's storage, no runtime, no rings; "
            "on CUDA the caching allocator's statistics), from the same runs:",
            "",
            "| process | peak tensor bytes (MiB) | x single-process |",
            "|---|---:|---:|",
            f"| single-process trainer | {mib(tt)} | 1.00 |",
            f"| encoder | {mib(tensors['encoder'])} | {tensors['encoder'] / tt:.2f} |",
            f"| decoder | {mib(tensors['decoder'])} | {tensors['decoder'] / tt:.2f} |",
            "",
            f"Target on small: larger stage by tensor bytes ({m['larger_tensor_stage']}) <= "
            f"{MEMORY_TARGET}x single-process: {m['tensor_ratio']:.2f}x: "
            f"{verdict(m['tensor_ratio'] <= MEMORY_TARGET)}. By RSS (below) the runtime "
            "every process maps dominates.",
        ]
    out += [
        "",
        f"{'By RSS' if tensors else 'Target on small'}: larger stage ({m['larger_stage']}) <= {MEMORY_TARGET}x single-process: "
        f"{m['ratio']:.2f}x: {verdict(m['ratio'] <= MEMORY_TARGET)}. Above the idle runtime: "
        f"{m['ratio_above_runtime']:.2f}x. Parameters: encoder {m['encoder_params']:,}, decoder "
        f"{m['decoder_params']:,}; the two rings hold {mib(m['ring_bytes'])} MiB. Peak device "
        f"memory: {m['device_memory']}.",
        "",
    ]
    if rec:
        rr = rec["peak_rss_bytes"]
        out += [
            f"The same with `pipeline.activations=recompute`: single {mib(rr['trainer'])} MiB, "
            f"encoder {mib(rr['encoder'])}, decoder {mib(rr['decoder'])}: {rec['ratio']:.2f}x "
            f"({rec['ratio_above_runtime']:.2f}x above the runtime)" + tensor_note(rec) + ".",
            "",
        ]
    if mb1:
        r1 = mb1["peak_rss_bytes"]
        out += [
            f"The same with `train.micro_batches=1` (one micro-batch in flight): single "
            f"{mib(r1['trainer'])} MiB, encoder {mib(r1['encoder'])}, decoder {mib(r1['decoder'])}: "
            f"{mb1['ratio']:.2f}x ({mb1['ratio_above_runtime']:.2f}x above the runtime)"
            + tensor_note(mb1) + ".",
            "",
        ]
    if m["ratio"] > MEMORY_TARGET:
        out += [
            "Why it is missed, in order of size:",
            "",
            f"1. **The LibTorch runtime.** A process of this build peaks at {mib(rt)} MiB before "
            "doing anything (the CUDA-enabled wheel's libraries are mapped and relocated). Each "
            "stage pays it and the single-process trainer pays it once, so on a model whose "
            "training state is a few hundred MiB it dominates the ratio. Those pages are mostly "
            "file-backed and shared between the processes, so physical memory is not tripled; "
            "RSS counts them in each. A CPU-only LibTorch, or measuring PSS/anonymous memory, "
            "would show the real split; a larger model (brats16g) shrinks the fixed share.",
            "2. **Activations in flight.** The single-process trainer runs forward and backward "
            "per micro-batch, so one micro-batch's activations live at a time. The pipeline's "
            "encoder forwards every micro-batch before any backward (sequential and gpipe hold "
            "all of them; 1f1b bounds it by the stage count), so it holds the encoder half's "
            "activations for 2 micro-batches: as much as the whole model's for one. "
            "`pipeline.activations: recompute` (keep only the encoder's input, recompute in "
            "backward) closes this part: the recompute line above measures it.",
            "3. **The rings.** Each stage writes one ring and reads the other; both rings' pages "
            f"({mib(m['ring_bytes'])} MiB) end up in each stage's RSS, on top of its own copies "
            "of the tensors it sends.",
            "4. **An uneven split.** The encoder holds "
            f"{m['encoder_params'] / (m['encoder_params'] + m['decoder_params']):.0%} of the "
            "parameters (the bottleneck's 512-channel convolutions), and with Adam three copies "
            "of each; the decoder holds the full-resolution half of the activations.",
            "",
        ]
    return out


def capacity_section(c, title):
    """One `bench capacity` run: the largest size each way trains under the budget."""
    what = "parameters" if c["scale"] == "features" else "patch voxels"
    out = [
        f"### {title}",
        "",
        f"`unet-pipeline bench capacity --config {c['config']} --budget "
        f"{size_text(c['budget_bytes'])} --scale {c['scale']}`"
        + (f" (sets {', '.join(c['sets'])})" if c["sets"] else "")
        + f": each probe trains {c['steps']} steps under `train.memory_budget`; a doubling "
        "then a bisection over the scale finds the largest that does not run out. Peak tensors is "
        "`peak_device_tensor_bytes` of that run (every process on the device together).",
        "",
        f"| way | largest that trains | parameters | peak tensors (MiB) | step (s) | x plain "
        f"({what}) | x best single-process |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in c["rows"]:
        out.append(
            f"| {r['way']} | {r['size'] or '(none)'} | {r['parameters']:,} | "
            f"{mib(r['peak_device_tensor_bytes'])} | {r['step_s']:.3f} | {r['vs_plain']:.2f} | "
            f"{r['vs_best_single']:.2f} |")
    # Every way that takes turns, recomputing (by levels or blocks, offloaded or not).
    pipes = [r for r in c["rows"] if "recompute" in r["way"] or "offload+park" in r["way"]]
    pipes = [r for r in pipes if not r["way"].startswith("single-process")]
    if pipes:
        best = max(pipes, key=lambda r: r["vs_plain"])
        out += [
            "",
            f"Targets: the pipeline's best way with parked stages ({best['way']}) trains "
            f"{best['vs_plain']:.2f}x plain single-process's {what} (target >= 2x: "
            f"{verdict(best['vs_plain'] >= 2)}) and {best['vs_best_single']:.2f}x the best "
            f"single-process way's (target >= 1x: {verdict(best['vs_best_single'] >= 1)}).",
        ]
    row = {r["way"]: r for r in c["rows"]}
    pairs = [("at the config's micro-batches", row.get("pipeline recompute+park"),
              row.get("4 stages recompute+park")),
             ("at one sample per micro-batch", row.get("pipeline recompute+park, mb of 1"),
              row.get("4 stages recompute+park, mb of 1"))]
    said = [f"{four['vs_plain'] / two['vs_plain']:.2f}x {how} (target >= 1.5x: "
            f"{verdict(four['vs_plain'] / two['vs_plain'] >= 1.5)})"
            for how, two, four in pairs if two and four and two["vs_plain"] > 0]
    if said and c["scale"] == "features":  # the more-stages targets are for model width
        out += ["", f"More stages in turns on the one device: 4 stages train the {what} of 2 "
                    f"times {'; '.join(said)}."]
    # One sample per micro-batch: the pipeline's best way against one process's
    # checkpointing and its offload (issue 29's targets are for the patch).
    mb1 = {w: r for w, r in row.items() if w.endswith("mb of 1") or w.endswith("micro-batches of 1")}
    ckpt = mb1.get("single-process, checkpointing, mb of 1")
    if not ckpt and "single-process, micro-batches of 1" not in row:
        # The config's micro-batches are one sample each already: every row is.
        mb1 = {w: r for w, r in row.items() if w != "pipeline keep"}
        ckpt = row.get("single-process, checkpointing")
    offload = mb1.get("single-process, offload, mb of 1")
    pipes1 = [r for w, r in mb1.items() if not w.startswith("single-process")]
    if (c["scale"] == "patch" and ckpt and offload and pipes1 and ckpt["vs_plain"] > 0
            and offload["vs_plain"] > 0):
        best = max(pipes1, key=lambda r: r["vs_plain"])
        a, b = best["vs_plain"] / ckpt["vs_plain"], best["vs_plain"] / offload["vs_plain"]
        out += ["", f"One sample per micro-batch: the pipeline's best way ({best['way']}) trains "
                    f"{a:.2f}x the {what} of single-process checkpointing (target >= 1.3x: "
                    f"{verdict(a >= 1.3)}) and {b:.2f}x single-process offload's (target >= 1.0x: "
                    f"{verdict(b >= 1.0)})."]
    out.append("")
    return out


def stages_section(s, title):
    """One `bench stages` run: 2, 3 and 4 stages under each schedule."""
    if not s:
        return []
    m = s["machine"]
    cores = m.get("cores", "?")
    out = [
        f"### {title}",
        "",
        f"`unet-pipeline bench stages --config {s['config']}`"
        + (f" (sets {', '.join(s['sets'])})" if s["sets"] else "")
        + f": one traced run of {s['steps']} steps per row, the first {s['warmup']} dropped; "
        f"{s['micro_batches']} micro-batches, the lock off, one thread per stage, on {cores} "
        "cores. Bubble: the stages' mean share of a step not computing (from the trace: each "
        "stage's compute spans less the ring waits inside them), beside the theory for equal "
        "stages, (S-1)/(M+S-1) for gpipe and 1f1b and (S-1)/S for sequential. First peak: the "
        "first stage's peak tensor bytes, with the micro-batches it holds at most (1f1b bounds "
        "them at S; gpipe and sequential keep all M).",
        "",
        "| stages | schedule | step (ms) | x sequential | bubble | theory | first stage's peak | in flight |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in s["rows"]:
        out.append(
            f"| {r['stages']} | {r['schedule']} | {r['step_ms']:.1f} | "
            f"{r['speedup_vs_sequential']:.2f} | {r['bubble']:.2f} | {r['bubble_theory']:.2f} | "
            f"{mib(r['first_peak_tensor_bytes'])} MiB | {r['first_in_flight']} |")
    out.append("")
    return out


def replicas_section(r):
    """One `bench replicas` run: copies of the pipeline, each stage's exchange beside Gloo's."""
    if not r:
        return []
    cores = r["machine"].get("cores", "?")
    out = [
        "## Replicas: copies of the pipeline",
        "",
        f"`unet-pipeline bench replicas --config {r['config']}`"
        + (f" (sets {', '.join(r['sets'])})" if r["sets"] else "")
        + f": one traced run of {r['steps']} steps per row, the first {r['warmup']} dropped, "
        f"batch {r['batch_size']} over every replica, on {cores} cores. Exchange: the time a "
        "stage's gradient exchange with its copies took per step (the \"replica exchange\" "
        "spans: flattening, the sum (Gloo's all-reduce with two replicas; with more, an "
        "all-to-all, the sum in replica order and an all-gather), the copy back) in the copy "
        "that came to it last, so waited least for the others; beside it, the "
        "copy that came first, whose time adds the wait. Peer: `torch.distributed.all_reduce` of the same bytes between as many "
        "Python processes over Gloo on loopback, same LibTorch (`bench/allreduce_peer.py`, "
        "median of 10).",
        "",
        "| replicas | step (ms) | samples/s | stage | gradients | exchange (ms) | with the wait (ms) | peer all_reduce (ms) | exchange / peer |",
        "|---:|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for row in r["rows"]:
        for k, s in enumerate(row["stages"]):
            peer = s.get("peer_allreduce_ms")
            lead = (f"| {row['replicas']} | {row['step_ms']:.1f} | {row['samples_per_s']:.1f} "
                    if k == 0 else "| | | ")
            out.append(
                lead + f"| {s['stage']} | {size_text(s['bytes'])} | {s['exchange_ms']:.2f} | "
                f"{s.get('exchange_with_wait_ms', 0):.2f} | "
                + (f"{peer:.2f} | {s['exchange_ms'] / peer:.2f}x |" if peer else "- | - |"))
    if r.get("single_process_step_ms"):
        sp = r["single_process_step_ms"]
        out += ["", f"The single-process trainer on the same batch, same run: {sp:.1f} ms a step "
                    f"({r['batch_size'] / sp * 1e3:.1f} samples/s)."]
    if r.get("peer_note"):
        out += ["", f"No peer: {r['peer_note']}."]
    out.append("")
    return out


def capacity_sections(runs):
    runs = [(c, t) for c, t in runs if c]
    if not runs:
        return []
    out = [
        "## Capacity: the largest model each way trains in one budget",
        "",
        "The same budget for every way, as a card of that size would be (`train.memory_budget`: "
        "on this CPU each device's processes share one counted total; parked state and ring slots "
        "stay outside it, as pinned host memory does on a GPU). The single-process ways are what "
        "a PyTorch user does on one card: plain, gradient accumulation down to one sample per "
        "micro-batch, activation checkpointing per level (`train.checkpointing: levels`), and "
        "both. What limits each: single-process holds the whole model's weights, gradients and "
        "Adam's two moments at once, four copies of every parameter, plus one micro-batch's "
        "activations; the pipeline's turn holds one stage's state (the other is parked in host "
        "memory) and, recomputing, one stage's activations, so at the state-bound end it fits "
        "about twice the parameters, and more where activations dominate and micro-batches "
        "shrink them.",
        "",
    ]
    for c, title in runs:
        out += capacity_section(c, title)
    return out


def kernels_text(uc):
    """Which convolution kernels a run's CPU gave oneDNN, from its machine."""
    m = (uc or {}).get("machine") or {}
    if not m:
        return ""
    isa = m.get("onednn_max_cpu_isa")
    if isa:
        return f"{m['cpu_model']}, oneDNN held to {isa} by `ONEDNN_MAX_CPU_ISA={isa}`"
    return f"{m['cpu_model']}{' with AVX-512' if m.get('avx512') else ''}, oneDNN's own choice"


def user_case_measured(uc, plans):
    """The same rows trained for real at the full patch, next to plan's prediction."""
    if not uc:
        return []
    kernels = kernels_text(uc)
    out = [
        (f"**{kernels}.** " if kernels else "")
        + "Measured for real (`bench/user_case.py`): each way trained two steps at the full "
        f"{'x'.join(map(str, uc['patch']))} patch, {uc['micro_batches']} micro-batches of one "
        "sample, on this CPU (2 threads, `UP_GLIBC_MALLOC_DEFAULTS=1` so that freed blocks go back "
        "to this 24 GiB machine, which slows the steps); peak tensor bytes from each run's "
        "`summary.json`, next to plan's prediction above:",
        "",
        "| precision | way | measured device peak (GiB) | stages (GiB) | plan (GiB) | plan / measured "
        "| under 16 GiB | step (s) |",
        "|---|---|---:|---|---:|---:|---|---:|",
    ]
    for r in uc["rows"]:
        if "error" in r:
            out.append(f"| {r['precision']} | {r['way']} | failed: {r['error']} | - | - | - | - | - |")
            continue
        plan = plans.get(r["precision"])
        row = next((x for x in (plan or {}).get("rows", []) if x["name"] == r["way"]), None)
        predicted = row.get("tensor_bytes") if row else None
        measured = r["peak_device_tensor_bytes"]
        stages = ", ".join(f"{k} {v / 2**30:.2f}" for k, v in r["peak_tensor_bytes"].items()
                           if k != "trainer") or "-"
        out.append(
            f"| {r['precision']} | {r['way']} | {measured / 2**30:.2f} | {stages} | "
            + (f"{predicted / 2**30:.2f} | {predicted / measured:.3f} |" if predicted else "- | - |")
            + f" {'yes' if measured < 16 * 2**30 else 'no'} | {r['step_s']:.0f} |")
    out.append("")
    return out


def user_case_verdict(uc, plan, kernels=""):
    """The one-card targets: the pipeline's best way against single-process
    checkpointing and against plan's floor, on the real runs where every way
    was run for real, else on plan's measured rows (probes extrapolated)."""
    if not plan:
        return []
    real = {r["way"]: r["peak_device_tensor_bytes"] for r in (uc or {}).get("rows", [])
            if "error" not in r and r["precision"] == "fp32"}
    source = "the real runs above"
    peaks = real
    if "pipeline offload" not in real:
        peaks = {r["name"]: r["tensor_bytes"] for r in plan["rows"] if "tensor_bytes" in r}
        source = ("plan's measured rows (two probe runs extrapolated; no real run of the "
                  "pipeline's ways: run `bench/user_case.py`)")
    pipes = {w: b for w, b in peaks.items() if w.startswith("pipeline")}
    singles = {w: b for w, b in peaks.items() if w.startswith("single-process")}
    ckpt = peaks.get("single-process checkpointing")
    if not pipes or not ckpt or not singles:
        return []
    best = min(pipes, key=pipes.get)
    best_single = min(singles, key=singles.get)
    peak = pipes[best]
    kernels = kernels_text(uc) or kernels
    where = f" ({kernels})" if kernels else ""
    out = [
        f"One card, fp32, 2 micro-batches of 1, from {source}{where}: the pipeline's best way ({best}, "
        f"{peak / 2**30:.2f} GiB) is {peak / ckpt:.2f}x single-process checkpointing's device "
        f"peak (target <= 0.75x: {verdict(peak <= 0.75 * ckpt)}) and "
        f"{peak / singles[best_single]:.2f}x the best single-process way's ({best_single}, "
        f"{singles[best_single] / 2**30:.2f} GiB)."
    ]
    floor = plan.get("floor_bytes", 0)
    if floor:
        out[-1] += (f" plan's floor, the largest block's forward and backward for one sample, is "
                    f"{floor / 2**30:.2f} GiB: the best way is {peak / floor:.2f}x it (target "
                    f"<= 1.1x: {verdict(peak <= 1.1 * floor)}).")
    rec = plan.get("recommended")
    if rec:
        out[-1] += f" plan recommends {rec['way']}: {rec['reason']}."
    out.append("")
    return out


def user_case_section(plans):
    """brats16g's measured plan rows (fp32 and bf16, one sample per micro-batch)."""
    plans = [(p, t) for p, t in plans if p]
    if not plans:
        return []
    out = [
        "## The user's case: brats16g against a 16 GiB card",
        "",
        "`unet-pipeline plan --config configs/brats16g.yaml --gpu-mem 16GiB --json` (192x192x96, "
        "batch 2, the 3-D U-Net of widths 32..256, 22.6M parameters; `configs/brats16g.yaml` stands "
        "in for nnU-Net's ResEnc L plan until the nnunet model kind exists). Each way trained two "
        "steps on this CPU at two halvings of the patch and its tensor bytes extrapolated to the "
        "full patch (`launcher/tools/memory_probe.h`; held within 10% of real runs by "
        "`PlanMeasured.*`). Tensor bytes only: a GPU adds its CUDA context (1 GiB counted per "
        "process for `fits`) and cuDNN workspace.",
        "",
        "| precision, micro-batches | way | device peak (GiB) | encoder stage (GiB) | decoder stage "
        "(GiB) | fits 16 GiB (with context) |",
        "|---|---|---:|---:|---:|---|",
    ]
    for p, title in plans:
        for r in p["rows"]:
            st = r.get("stage_tensor_bytes") or {}
            enc = f"{st['encoder'] / 2**30:.1f}" if st else "-"
            dec = f"{st['decoder'] / 2**30:.1f}" if st else "-"
            out.append(f"| {title} | {r['name']} | {r.get('tensor_bytes', 0) / 2**30:.1f} | {enc} | "
                       f"{dec} | {'yes' if r['fits'] else 'no'} |")
    out.append("")
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: report.py RESULTS_DIR OUT_MD")
    folder, out_path = sys.argv[1], sys.argv[2]
    t = load(folder, "transport")
    tiny = load(folder, "step-tiny")
    small = load(folder, "step-small")
    mem = load(folder, "memory-small")
    mb1 = load(folder, "memory-small-mb1")
    rec = load(folder, "memory-small-recompute")
    lines = [
        "# Benchmarks",
        "",
        "Generated by `bench/report.py` from the JSON in `bench/results/`, written by "
        "`bench/run-all.sh` (build, run every bench, regenerate this file). Do not edit by hand: "
        "rerun the script. Every figure stands next to its limit or peer, measured in the same "
        "run, with the ratio; no figure here is asserted by a test.",
        "",
    ]
    names = sorted(os.path.splitext(f)[0] for f in os.listdir(folder) if f.endswith(".json"))
    lines += machine_section([(n, load(folder, n)) for n in names])
    if t:
        lines += transport_section(t)
    lines += step_sections(tiny, small)
    stages = [(load(folder, "stages-tiny"), "tiny"), (load(folder, "stages-small"), "small")]
    if any(st for st, _ in stages):
        lines += ["## More stages: step time, bubble and kept activations", ""]
        for st, title in stages:
            lines += stages_section(st, title)
    lines += replicas_section(load(folder, "replicas-tiny"))
    if mem:
        lines += memory_section(mem, mb1, rec)
    lines += user_case_section([
        (load(folder, "plan-brats16g"), "fp32, 1 micro-batch of 2"),
        (load(folder, "plan-brats16g-mb1"), "fp32, 2 micro-batches of 1"),
        (load(folder, "plan-brats16g-bf16-mb1"), "bf16, 2 micro-batches of 1"),
    ])
    # The same runs with oneDNN held to AVX2 where the CPU has AVX-512: its
    # AVX-512 convolutions hold a copy of a block's input (run-all.sh).
    plan, bf16 = load(folder, "plan-brats16g-mb1"), load(folder, "plan-brats16g-bf16-mb1")
    uc = load(folder, "user-case")
    lines += user_case_measured(uc, {"fp32": plan, "bf16": bf16})
    lines += user_case_verdict(uc, plan)
    uc, plan = load(folder, "user-case-avx2"), load(folder, "plan-brats16g-mb1-avx2")
    lines += user_case_measured(uc, {"fp32": plan})
    lines += user_case_verdict(uc, plan, "oneDNN held to AVX2")
    lines += capacity_sections([
        (load(folder, "capacity-tiny"), "tiny, widths scaled"),
        (load(folder, "capacity-tiny-patch"), "tiny, patch scaled"),
        (load(folder, "capacity-tiny3d"), "tiny3d, widths scaled"),
        (load(folder, "capacity-tiny3d-patch"), "tiny3d, patch scaled"),
    ])
    # The GPU check's section (scripts/gpu-report.py) is not this script's:
    # carried over as it stands.
    gpu = ""
    if os.path.exists(out_path):
        old = open(out_path).read()
        begin, end = old.find(GPU_BEGIN), old.find(GPU_END)
        if begin != -1 and end > begin:
            gpu = "\n" + old[begin:end + len(GPU_END)] + "\n"
    with open(out_path, "w") as f:
        f.write("\n".join(lines).rstrip() + "\n" + gpu)


if __name__ == "__main__":
    main()
