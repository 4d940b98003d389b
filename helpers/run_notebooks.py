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


def execute(path: Path, timeout: int) -> float:
    nb = nbformat.read(path, as_version=4)
    start = time.time()
    NotebookClient(nb, timeout=timeout, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    nbformat.write(nb, path)
    return time.time() - start


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
    for p in args.notebooks:
        print(f"{p}: {execute(p, args.timeout):.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
