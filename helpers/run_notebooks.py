"""Execute notebooks in place, keeping their outputs:  python -m helpers.run_notebooks notebooks/0*.ipynb

This is how the committed outputs are made on a GPU machine. With COURSE_RECORD=1 set, every
live measurement is also written to notebooks/results/<gpu>/ (see helpers.records).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError


def execute(path: Path, timeout: int) -> tuple[float, str | None]:
    """Run one notebook top to bottom and save it; on a failing cell, save what ran (the
    error shows in that cell) and return the error's first line."""
    nb = nbformat.read(path, as_version=4)
    start = time.time()
    error = None
    try:
        NotebookClient(nb, timeout=timeout, kernel_name="python3",
                       resources={"metadata": {"path": str(path.parent)}}).execute()
    except CellExecutionError as err:
        error = str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__
    nbformat.write(nb, path)
    return time.time() - start, error


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("notebooks", nargs="+", type=Path)
    ap.add_argument("--timeout", type=int, default=900, help="seconds per cell")
    args = ap.parse_args(argv)
    missing = [str(p) for p in args.notebooks if not p.exists()]
    if missing:
        print(f"no such notebook: {', '.join(missing)}", file=sys.stderr)
        return 2
    os.environ.setdefault("COURSE_RECORD_COMMAND", "python -m helpers.run_notebooks " + " ".join(map(str, args.notebooks)))
    failed = 0
    for p in args.notebooks:
        seconds, error = execute(p, args.timeout)
        print(f"{p}: {seconds:.0f} s" + (f", FAILED: {error}" if error else ""), flush=True)
        failed += error is not None
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
