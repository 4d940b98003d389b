"""Round 2 for notebooks 03/04: run the notebooks' own schedule functions (extracted from the
.ipynb files) on the variants the notebooks measure, to check them on the GPU before the
notebooks' live run, and to time what round 1 did not (cp.async, padded shapes, the ladder at 4096^3).

    PYTHONPATH=. python gpu/experiments/03_04_matmul_round2.py [--dry]
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np
import tvm

import helpers

ROOT = Path(__file__).resolve().parents[2]
T0 = time.time()
BUDGET_S = 200.0
HEADER = """import numpy as np
import tvm
from tvm import s_tir
from tvm.script import tirx as T
import helpers
"""


def notebook_functions(path, names):
    """Module with the named top-level functions of a notebook's code cells (TVMScript needs a file)."""
    nb = json.loads(Path(path).read_text())
    chunks = []
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        src = "".join(cell["source"])
        try:
            tree = ast.parse(src)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name in names:
                chunks.append(ast.get_source_segment(src, node))
    tmp = Path(tempfile.mkdtemp()) / (Path(path).stem.replace("-", "_") + "_fns.py")
    tmp.write_text(HEADER + "\n\n".join(chunks) + "\n")
    spec = importlib.util.spec_from_file_location(tmp.stem, tmp)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--dry", action="store_true")
    args = ap.parse_args(argv)
    dry = args.dry or not helpers.gpu_available()
    r1_spec = importlib.util.spec_from_file_location("r1", ROOT / "gpu/experiments/03_04_matmul.py")
    r1 = importlib.util.module_from_spec(r1_spec)
    r1_spec.loader.exec_module(r1)
    n3 = notebook_functions(ROOT / "notebooks/03_matmul_local_blocking.ipynb",
                            {"matmul_module", "naive", "threads_1d", "threads_2d", "local_blocking"})
    n4 = notebook_functions(ROOT / "notebooks/04_matmul_shared_blocking.ipynb",
                            {"matmul_module", "threads_2d", "shared_blocking"})
    S, R, P = (4096, 4096, 4096), (1024, 512, 2048), (1000, 1000, 1000)
    ASYNC = {"tirx.use_async_copy": True}
    T16 = (8, 8, 16, 16, 16)
    V = [  # (name, shape, builder, pass config)
        ("03 local padded (8,8,16,16,8)", P, lambda s: n3.local_blocking(*s, (8, 8, 16, 16, 8), unroll=True, registers=True, interleave=4, pad=True), {}),
        ("04 shared padded (8,8,16,16,8) At pad4", P, lambda s: n4.shared_blocking(*s, (8, 8, 16, 16, 8), a_transposed=True, pad_rows=4, pad=True), {}),
        ("04 pipe2 cp.async A[i][k] pad4 T16", S, lambda s: n4.shared_blocking(*s, T16, pad_rows=4, stages=2, async_copy=True), ASYNC),
        ("04 pipe2 A[i][k] pad4 T16 (sync)", S, lambda s: n4.shared_blocking(*s, T16, pad_rows=4, stages=2), {}),
        ("04 pipe2 At pad4 T16", S, lambda s: n4.shared_blocking(*s, T16, a_transposed=True, pad_rows=4, stages=2), {}),
        ("04 pipe2 At pad4 T16", R, lambda s: n4.shared_blocking(*s, T16, a_transposed=True, pad_rows=4, stages=2), {}),
        ("04 pipe3 cp.async A[i][k] pad4 (8,8,16,16,8)", S, lambda s: n4.shared_blocking(*s, (8, 8, 16, 16, 8), pad_rows=4, stages=3, async_copy=True), ASYNC),
        ("04 pipe2 At pad4 (8,8,8,16,16)", S, lambda s: n4.shared_blocking(*s, (8, 8, 8, 16, 16), a_transposed=True, pad_rows=4, stages=2), {}),
        ("04 pipe2 At pad4 (8,8,16,16,8)", S, lambda s: n4.shared_blocking(*s, (8, 8, 16, 16, 8), a_transposed=True, pad_rows=4, stages=2), {}),
        ("04 seed (8,8,8,8,8)", S, lambda s: n4.shared_blocking(*s, (8, 8, 8, 8, 8), registers=False, interleave=None), {}),
        ("04 seed (8,8,8,8,8)", R, lambda s: n4.shared_blocking(*s, (8, 8, 8, 8, 8), registers=False, interleave=None), {}),
        ("04 128x128 contiguous + registers T16", S, lambda s: n4.shared_blocking(*s, T16, interleave=None), {}),
        ("04 interleaved A[i][k] T16", S, lambda s: n4.shared_blocking(*s, T16), {}),
        ("04 interleaved A[i][k] padded T16", S, lambda s: n4.shared_blocking(*s, T16, pad_rows=4), {}),
        ("04 interleaved A[k][i] T16", S, lambda s: n4.shared_blocking(*s, T16, a_transposed=True), {}),
        ("04 interleaved A[k][i] padded T16", S, lambda s: n4.shared_blocking(*s, T16, a_transposed=True, pad_rows=4), {}),
        ("04 fetch vec2 T16", S, lambda s: n4.shared_blocking(*s, T16, vec=2, a_transposed=True, pad_rows=4), {}),
        ("03 local (8,8,8,8,4) + unroll", S, lambda s: n3.local_blocking(*s, (8, 8, 8, 8, 4), unroll=True), {}),
        ("03 local (8,8,8,8,4) + unroll + registers", S, lambda s: n3.local_blocking(*s, (8, 8, 8, 8, 4), unroll=True, registers=True), {}),
        ("03 local (8,8,8,8,4) + unroll + registers + interleave", S, lambda s: n3.local_blocking(*s, (8, 8, 8, 8, 4), unroll=True, registers=True, interleave=4), {}),
        ("03 local (8,8,8,8,4) + unroll + registers + interleave", R, lambda s: n3.local_blocking(*s, (8, 8, 8, 8, 4), unroll=True, registers=True, interleave=4), {}),
        ("03 local (8,8,8,16,4) full", S, lambda s: n3.local_blocking(*s, (8, 8, 8, 16, 4), unroll=True, registers=True, interleave=4), {}),
        ("03 local (4,8,16,16,4) full", S, lambda s: n3.local_blocking(*s, (4, 8, 16, 16, 4), unroll=True, registers=True, interleave=4), {}),
        ("03 1D threads", S, lambda s: n3.threads_1d(*s), {}),
        ("03 2D threads", S, lambda s: n3.threads_2d(*s), {}),
        ("03 naive", S, lambda s: n3.naive(*s), {}),
    ]
    target = helpers.make_target() if not dry else helpers.listing_target()
    print(f"TVM {tvm.__version__}, {'DRY' if dry else 'live'}", flush=True)
    dev = None if dry else helpers.device()
    cublas = {}
    if not dry:
        for shape in (S, R, P):
            cublas[shape] = helpers.cublas_time(*shape, "float32", repeat=10)
            print(f"cuBLAS fp32 {shape}: {cublas[shape]:.4f} ms", flush=True)
    rows, inputs = [], {}
    for name, shape, fn, config in V:
        if time.time() - T0 > BUDGET_S:
            rows.append((name, shape, None, None, "skipped (time budget)"))
            continue
        t = time.time()
        try:
            sch = fn(shape)
            with tvm.transform.PassContext(config=config):
                ex = helpers.build(sch, target)
                if dry:
                    rep = helpers.ptxas_report(sch) if helpers.nvcc_path() else []
                    rows.append((name, shape, None, None, f"built; {rep[0] if rep else ''}"))
                    continue
            if shape not in inputs:
                inputs.clear()
                inputs[shape] = r1.Inputs(*shape, dev)
            inp = inputs[shape]
            inp.args[2].copyfrom(inp.nan)
            t1 = time.time()
            ex.mod["main"](*inp.args)
            dev.sync()
            first_ms = (time.time() - t1) * 1e3
            err = inp.error()
            if not err <= 1e-4:
                rows.append((name, shape, None, err, "WRONG"))
                print(f"{name} {shape}: WRONG rel err {err:.2e}", flush=True)
                continue
            ms = r1.time_ms(ex.mod, dev, inp.args, first_ms)
            rows.append((name, shape, ms, err, ""))
            M, N, K = shape
            print(f"{name} {shape}: {ms:.4f} ms {2 * M * N * K / ms / 1e9:.2f} TFLOP/s err {err:.1e} ({time.time() - t:.1f}s)", flush=True)
        except Exception as e:
            msg = f"{type(e).__name__}: {str(e).strip().splitlines()[-1][:160] if str(e).strip() else ''}"
            rows.append((name, shape, None, None, "FAILED " + msg))
            print(f"{name} {shape}: FAILED {msg}", flush=True)
            traceback.print_exc(limit=2)
    print("\n==== round 2 results (fp32; % of cuBLAS fp32, TF32 off, same run) ====")
    print(f"{'variant':58s} {'shape':16s} {'ms':>9s} {'TFLOP/s':>8s} {'rel err':>8s} {'%cuBLAS':>7s}  note")
    for name, shape, ms, err, note in rows:
        M, N, K = shape
        tf = f"{2 * M * N * K / ms / 1e9:8.2f}" if ms else f"{'-':>8s}"
        pct = f"{100 * cublas[shape] / ms:6.1f}%" if ms and cublas.get(shape) else f"{'-':>7s}"
        print(f"{name:58s} {'x'.join(map(str, shape)):16s} {ms if ms else float('nan'):9.4f} {tf} "
              f"{err if err is not None else float('nan'):8.1e} {pct}  {note}")
    print(f"total {time.time() - T0:.0f} s")


if __name__ == "__main__":
    main()
