"""How long a student waits for a notebook's first cells: the setup cell, the imports and
`helpers.start(...)`, each run in a fresh Python process, as a new notebook kernel runs them.

    python gpu/experiments/first_cell.py                    # this checkout: every notebook, 3 runs each
    python gpu/experiments/first_cell.py 00 05 --repeat 1   # some notebooks, one run each
    python gpu/experiments/first_cell.py --tree ../old      # another checkout's helpers, for a before/after

A benchmark to read, not a test: it prints one line per notebook (every run's seconds and their
median, the first run being the coldest) under a header naming the machine, the date and TVM's
version, and a second table splitting one run of `import helpers` into its slowest imports
(`python -X importtime`). It runs anywhere; on a GPU it measures the GPU machine's start-up.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[2]  # the checkout


def first_cells(notebook: Path) -> str:
    """The code cells up to and including the one that calls `helpers.start(`."""
    cells = [c for c in json.loads(notebook.read_text())["cells"] if c["cell_type"] == "code"]
    code = []
    for cell in cells:
        code.append("".join(cell["source"]))
        if "helpers.start(" in code[-1]:
            return "\n\n".join(code)
    raise LookupError(f"{notebook.name} has no code cell calling helpers.start(")


def _env(tree: Path) -> dict:
    """This environment with `tree` first on the path (its helpers win over an installed copy)."""
    return dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(tree), os.environ.get("PYTHONPATH")])),
                MPLBACKEND="Agg")


def run_once(code: str, tree: Path) -> float:
    env = _env(tree)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], cwd=HERE / "notebooks", env=env, check=True,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def slowest_imports(tree: Path, count: int = 8) -> list[tuple[float, str]]:
    """The cumulative time of the slowest imports under `import helpers`, from `python -X importtime`."""
    env = _env(tree)
    err = subprocess.run([sys.executable, "-X", "importtime", "-c", "import helpers"], cwd=HERE / "notebooks",
                         env=env, capture_output=True, text=True, check=True).stderr
    rows = []
    for line in err.splitlines():
        if line.startswith("import time:") and "|" in line and "cumulative" not in line:
            _, cumulative, name = line.split("|")
            rows.append((int(cumulative) / 1e6, name.rstrip()))
    return sorted(rows, reverse=True)[:count]


def machine() -> str:
    try:
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, check=True).stdout.strip().splitlines()[0]
        return f"{gpu.replace(', ', ', driver ')}, {os.cpu_count()} cores"
    except (OSError, subprocess.CalledProcessError, IndexError):
        return f"no GPU, {platform.processor() or platform.machine()}, {os.cpu_count()} cores"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python gpu/experiments/first_cell.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("notebooks", nargs="*", help="notebook numbers, e.g. 00 05 (default: all)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tree", type=Path, default=HERE, help="the checkout whose helpers are imported")
    args = ap.parse_args(argv)
    paths = sorted((HERE / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    if args.notebooks:
        paths = [p for p in paths if p.name[:2] in args.notebooks]
    from importlib import metadata

    now = datetime.datetime.now(datetime.timezone.utc)
    print(f"# {machine()}, {now:%Y-%m-%d %H:%M} UTC, apache-tvm {metadata.version('apache-tvm')}, "
          f"Python {platform.python_version()}; helpers from "
          f"{'this checkout' if args.tree.resolve() == HERE else args.tree}")
    print(f"# python3 gpu/experiments/first_cell.py {' '.join(sys.argv[1:] if argv is None else argv)}")
    print(f"{'notebook':32} {'runs (s)':>24} {'median':>7}")
    for path in paths:
        code = first_cells(path)
        runs = [run_once(code, args.tree.resolve()) for _ in range(args.repeat)]
        print(f"{path.stem:32} {' '.join(f'{r:5.1f}' for r in runs):>24} {statistics.median(runs):7.1f}")
    print("\nslowest imports under `import helpers` (cumulative s, one run):")
    for seconds, name in slowest_imports(args.tree.resolve()):
        print(f"{seconds:7.2f}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
