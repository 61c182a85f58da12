#!/usr/bin/env python3
"""examples/notebook.ipynb, executed top to bottom as a reader would run it.

usage: notebook_test.py SOURCE_DIR BUILD_DIR [STEPS]

nbclient runs every cell in a Python kernel of this interpreter (.venv), in
a scratch folder, with the package from SOURCE_DIR/python, the programs of
BUILD_DIR and UP_NOTEBOOK_STEPS=STEPS (default 3) shortening the training. A
cell that raises fails the test with its traceback; then the run it made is
checked: the plan shown as its table, STEPS steps trained, a mask predicted.
"""
import json
import os
import sys
import tempfile

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError


def fail(what):
    sys.exit(f"notebook_test: {what}")


def outputs_text(nb):
    """Every output's text and HTML, joined."""
    parts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            parts.append(out.get("text", ""))
            data = out.get("data", {})
            parts += [data.get("text/plain", ""), data.get("text/html", "")]
    return "\n".join(parts)


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    src, build = (os.path.abspath(a) for a in sys.argv[1:3])
    steps = int(sys.argv[3]) if len(sys.argv) == 4 else 3
    nb = nbformat.read(os.path.join(src, "examples", "notebook.ipynb"), as_version=4)
    if any(cell.get("outputs") for cell in nb.cells if cell.cell_type == "code"):
        fail("examples/notebook.ipynb is committed with outputs; clear them")
    os.environ.update(UP_BUILD_DIR=build, UP_NOTEBOOK_STEPS=str(steps),
                      PYTHONPATH=os.pathsep.join(filter(None, [
                          os.path.join(src, "python"), os.environ.get("PYTHONPATH")])))
    with tempfile.TemporaryDirectory() as tmp:
        client = NotebookClient(nb, timeout=600, kernel_name="python3",
                                resources={"metadata": {"path": tmp}})
        try:
            client.execute()
        except CellExecutionError as e:
            fail(f"a cell failed:\n{e}")
        text = outputs_text(nb)
        print(text[-3000:])
        if "recommended:" not in text or "<table>" not in text:
            fail("the plan cell did not show plan's table and its recommendation")
        summary = json.load(open(os.path.join(tmp, "runs", "notebook", "summary.json")))
        if summary.get("steps") != steps:
            fail(f"the notebook trained {summary.get('steps')} steps, not {steps}")
        if not os.path.exists(os.path.join(tmp, "runs", "notebook", "pred", "case00_seg.nii.gz")):
            fail("the notebook predicted no case00_seg.nii.gz")
        print(f"notebook_test: ok: {len(nb.cells)} cells ran, {steps} steps trained, "
              f"param_digest {summary['param_digest']}")


if __name__ == "__main__":
    main()
