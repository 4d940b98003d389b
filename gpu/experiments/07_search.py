"""The committed search behind notebook 08's sections 2 and 3: the persistent kernel's own design
space (the notebook's `hopper_space`: block width, ring depth, tile order), searched with
MetaSchedule's builder, runner and database (`helpers.search`) at every size of section 3.

    python gpu/experiments/07_search.py                 # on a Hopper GPU, from the repo root
    python gpu/experiments/07_search.py --sizes 4096x4096x4096 --out /tmp/db
    python gpu/experiments/07_search.py --dry           # no GPU: the configurations per size

The database goes to notebooks/results/<this GPU>/tuning/hopper_persistent (or --out), one
workload per size; a size searched again adds its records to the ones there. Every candidate is
checked against a float64 reference before it is timed; the output, headed by the GPU, date, TVM
version and command, lists the five fastest per size.
"""

from __future__ import annotations

import argparse
import functools
import shlex
import sys
import time
from datetime import datetime, timezone

import numpy as np
import tvm

import helpers
from lesson_code import hopper


NOTEBOOK = hopper()  # notebook 07's kernel and 08's persistent one, with its space
SIZES = ["512x512x512", "1024x1024x1024", "2048x2048x2048", "4096x4096x4096", "8192x8192x8192", "1024x512x2048"]


def search_at(shape, out, ctas: int, smem: int) -> int:
    m, n, k = shape
    space = NOTEBOOK.hopper_space(m, n, k, ctas, smem)
    if out is None:
        print(f"{m}x{n}x{k}: {len(space)} configurations")
        return 0
    rng = np.random.default_rng(1)
    a, b = rng.uniform(-1, 1, (m, k)).astype("float16"), rng.uniform(-1, 1, (k, n)).astype("float16")
    start = time.perf_counter()
    found = helpers.search(helpers.matmul_workload(m, n, k, "float16", "float32"), space,
                           functools.partial(NOTEBOOK.hopper_kernel, m, n, k, ctas), out,
                           inputs=[a, b, np.zeros((m, n), "float32")], expected=a.astype("float64") @ b.astype("float64"),
                           target="sm_90a", tir_pipeline="tirx")
    timed = [f for f in found if f.ms is not None]
    print(f"{m}x{n}x{k}: {len(timed)} of {len(found)} configurations correct and timed "
          f"({time.perf_counter() - start:.0f} s); the fastest:")
    for f in timed[:5]:
        print(f"  {f}  {2.0 * m * n * k / (f.ms * 1e-3) / 1e12:6.1f} TFLOP/s")
    for f in found:
        if f.ms is None:
            print(f"  failed: {f}")
    return 0 if timed else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", default=SIZES, help="MxNxK, e.g. 4096x4096x4096")
    parser.add_argument("--out", help="the database directory (default: this GPU's committed one)")
    parser.add_argument("--dry", action="store_true", help="no GPU: count the configurations")
    args = parser.parse_args()
    shapes = [tuple(int(x) for x in size.split("x")) for size in args.sizes]
    spec = helpers.local_gpu_spec() if not args.dry else None
    # the space's grid (one block per SM) and shared memory: this Hopper GPU's, or the recorded H100's (--dry)
    gpu = spec or helpers.start("08_hopper_persistent_kernel").spec
    smem = gpu.max_shared_memory_per_block if spec is not None else helpers.arch_constants("9.0")["smem_block"]
    out = None if args.dry else (args.out or helpers.database_dir("hopper_persistent", spec.name))
    if spec is not None:
        print(f"# {spec.name}, {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, apache-tvm {tvm.__version__}: "
              f"python {shlex.join(sys.argv)}", flush=True)
    return max(search_at(shape, out, gpu.sm_count, smem) for shape in shapes)


if __name__ == "__main__":
    sys.exit(main())
