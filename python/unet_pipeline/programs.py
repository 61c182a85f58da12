"""The C++ programs under the package: where they are, building them once, running them.

The package lives in the checkout (`pip install -e .`), so the checkout's
scripts build the programs into build/bin (or $UP_BUILD_DIR/bin) the first
time they are missing: scripts/install-deps.sh --train with this Python as
UP_PYTHON (its torch is the one built against when it is new enough), then
scripts/build.sh --programs, its counter shown as a progress bar.

A program that fails raises RunError with its one `unet-pipeline: error: ...`
line; everything it logged stays in the run folder's logs.
"""
import os
import re
import signal
import subprocess
import sys
import threading

PROGRAMS = ("unet-pipeline", "encoder_proc", "decoder_proc")
ERROR_PREFIX = "unet-pipeline: error:"


class RunError(RuntimeError):
    """A program refused or failed; the message is its one error line."""


def source_dir():
    """The checkout this package sits in ($UP_SOURCE_DIR when set)."""
    root = os.environ.get("UP_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", "..")
    root = os.path.abspath(root)
    if not os.path.exists(os.path.join(root, "scripts", "build.sh")):
        raise RunError(f"unet_pipeline: {root} is not a unet-pipeline checkout (no "
                       "scripts/build.sh); install the package from one with "
                       "`pip install -e .`, or set UP_SOURCE_DIR")
    return root


def build_dir():
    build = os.environ.get("UP_BUILD_DIR") or "build"
    return build if os.path.isabs(build) else os.path.join(source_dir(), build)


def program(name="unet-pipeline"):
    return os.path.join(build_dir(), "bin", name)


def tqdm(**kwargs):
    """A progress bar: a notebook's widget where there is one, else text (tqdm.auto).

    Without ipywidgets tqdm.auto says so with a warning and draws text; the
    text bar is all this package needs, so that warning is not shown.
    """
    import warnings  # noqa: PLC0415

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from tqdm.auto import tqdm as bar  # noqa: PLC0415 - imported when a bar is drawn
    return bar(**kwargs)


def _missing():
    return [p for p in PROGRAMS if not os.access(program(p), os.X_OK)]


def _stream(command, env, on_line):
    """Runs command with its output, line by line, to on_line; (exit code, last lines)."""
    tail = []
    with subprocess.Popen(command, cwd=source_dir(), env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, bufsize=1) as proc:
        for line in proc.stdout:
            line = line.rstrip("\n")
            tail = (tail + [line])[-20:]
            on_line(line)
    return proc.returncode, tail


def ensure_built(progress=True):
    """Builds the programs when one is missing; returns the path of unet-pipeline."""
    if not _missing():
        return program()
    env = dict(os.environ, UP_PYTHON=sys.executable)
    say = print if progress else (lambda _line: None)
    say(f"unet_pipeline: building {', '.join(_missing())} into {build_dir()}/bin (once)")
    rc, tail = _stream(["scripts/install-deps.sh", "--train"], env, say)
    if rc != 0:
        raise RunError(tail[-1] if tail else f"scripts/install-deps.sh exited {rc}")
    counter = re.compile(r"^build: \[(\d+)/(\d+)\] (.*)$")
    bar = tqdm(desc="build", unit="step", disable=not progress)

    def on_build_line(line):
        m = counter.match(line)
        if m:
            bar.total = int(m.group(2))
            bar.n = int(m.group(1))
            bar.set_postfix_str(m.group(3)[-40:], refresh=False)
            bar.refresh()
        elif not line.startswith("build: ["):
            say(line)

    try:
        rc, tail = _stream(["scripts/build.sh", "--programs"], env, on_build_line)
    finally:
        bar.close()
    if rc != 0 or _missing():
        raise RunError(tail[-1] if tail else f"scripts/build.sh exited {rc}")
    return program()


def error_line(lines, rc, where):
    """The program's one error line, else its last line and where the rest is."""
    for line in reversed(lines):
        if line.startswith(ERROR_PREFIX):
            return line
    last = next((l for l in reversed(lines) if l.strip()), "")
    return (f"{ERROR_PREFIX} {' '.join(where)} exited {rc}"
            + (f": {last.strip()}" if last else ""))


def run(args, progress=None, echo=False):
    """Runs `unet-pipeline ARGS...`; returns its stdout. RunError on failure.

    progress, when given, is called about five times a second while the
    program runs (it reads the run's own files). echo prints the program's
    log lines as they come. Ctrl-C (KeyboardInterrupt) is passed on as
    SIGINT, which lets a training run checkpoint and stop, and then raised.
    """
    command = [ensure_built(progress is not None)] + list(args)
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            bufsize=1)
    logged, out = [], []

    def read_log():
        for line in proc.stderr:
            logged.append(line.rstrip("\n"))
            if echo:
                print(line, end="", file=sys.stderr, flush=True)

    readers = [threading.Thread(target=read_log, daemon=True),
               threading.Thread(target=lambda: out.append(proc.stdout.read()), daemon=True)]
    for t in readers:
        t.start()
    try:
        while True:
            try:
                proc.wait(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                if progress is not None:
                    progress()
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGINT)
        proc.wait()
        raise
    finally:
        for t in readers:
            t.join(timeout=5)
    if progress is not None:
        progress()
    if proc.returncode != 0:
        raise RunError(error_line(logged, proc.returncode, args[:1]))
    return "".join(out)
