"""Execute notebooks in place, keeping their outputs:  python -m tools.run_notebooks notebooks/[0-9]*.ipynb

This is how the committed outputs are made on a GPU machine. With COURSE_RECORD=1 set, every
live measurement is also written to notebooks/results/<gpu>/ (see helpers.records).

With --recorded-outputs, on a machine without a GPU, only the cells tagged `recorded-output`
(tables and charts computed from the records, see tools.recorded_outputs) take their new
outputs: the command that brings them up to date after the records change, keeping every other
output as the GPU run made it.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from helpers import env, records
from tools import recorded_outputs


def execute(path: Path, timeout: int, recorded_only: bool = False) -> tuple[float, str | None]:
    """Run one notebook top to bottom and save it; on a failing cell, save what ran (the
    error shows in that cell) and return the error's first line. `recorded_only`: save only the
    new outputs of `recorded-output` cells (and nothing on an error)."""
    committed = nbformat.read(path, as_version=4)
    nb = copy.deepcopy(committed)
    start = time.time()
    error = None
    try:
        NotebookClient(nb, timeout=timeout, kernel_name="python3",
                       resources={"metadata": {"path": str(path.parent)}}).execute()
    except CellExecutionError as err:
        error = str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__
    if recorded_only:
        if error:
            return time.time() - start, error
        for old, new in zip(committed.cells, nb.cells):
            if recorded_outputs.is_recorded_output(old):
                old.outputs = _joined_streams(new.outputs)
        nb = committed
    nbformat.write(nb, path)
    return time.time() - start, error


def _joined_streams(outputs: list) -> list:
    """Consecutive pieces of one stream as one output, as Jupyter saves a cell's printing."""
    joined = []
    for out in outputs:
        if joined and out.get("output_type") == "stream" and joined[-1].get("output_type") == "stream" \
                and joined[-1].get("name") == out.get("name"):
            joined[-1]["text"] += out["text"]
        else:
            joined.append(out)
    return joined


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("notebooks", nargs="+", type=Path)
    ap.add_argument("--timeout", type=int, default=900, help="seconds per cell")
    ap.add_argument("--recorded-outputs", action="store_true",
                    help="rewrite only the outputs computed from the committed records (no GPU)")
    args = ap.parse_args(argv)
    if args.recorded_outputs and not records.shows_committed_records(env.gpu_available()):
        print("--recorded-outputs needs the committed records as they are: run it without a GPU, "
              f"with {records.PERTURB_VARIABLE} and COURSE_RECORDED_GPU unset", file=sys.stderr)
        return 2
    missing = [str(p) for p in args.notebooks if not p.exists()]
    if missing:
        print(f"no such notebook: {', '.join(missing)}", file=sys.stderr)
        return 2
    os.environ.setdefault("COURSE_RECORD_COMMAND", "python -m tools.run_notebooks " + " ".join(map(str, args.notebooks)))
    failed = 0
    for p in args.notebooks:
        seconds, error = execute(p, args.timeout, args.recorded_outputs)
        print(f"{p}: {seconds:.0f} s" + (f", FAILED: {error}" if error else ""), flush=True)
        failed += error is not None
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
