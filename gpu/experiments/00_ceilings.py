"""Notebook 00's ceilings, measured broadly so the notebook's choices are grounded.

    python gpu/experiments/00_ceilings.py          # on a GPU: build, check, time, one table
    python gpu/experiments/00_ceilings.py --dry    # anywhere: only build every TensorIR variant

Bandwidth: a TensorIR copy B[i] = A[i] (bytes = read + written) at several sizes (from
L2-resident to far beyond L2) and threads per block, a float4 vectorized copy and a copy with a
serial loop of several elements per thread, against torch's device-to-device copy.
Compute: cuBLAS fp32 (TF32 off), TF32 and fp16 at 4096^3 (and 8192^3 for fp32/fp16).

At the end it prints one table, then one line `RECORDS_JSON {...}` holding the GPU's spec and
the measurements under the names notebook 00 uses (so its recorded results can be made from a
real run, never typed by hand).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import traceback

import numpy as np
import tvm
from tvm.script import ir as I
from tvm.script import tirx as T

import helpers
from helpers import bench

SIZES = [1 << 20, 1 << 22, 1 << 24, 1 << 26, 1 << 28]  # floats per array
THREADS = [64, 128, 256, 512, 1024]
NOTEBOOK_SIZE, NOTEBOOK_THREADS = 1 << 26, 256  # what notebook 00 measures (scalar and float4)


def copy_module(n: int) -> tvm.IRModule:
    @I.ir_module
    class Copy:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((n,), "float32"), B: T.Buffer((n,), "float32")):
            T.func_attr({"tirx.noalias": True})
            for i in range(n):
                with T.sblock("B"):
                    vi = T.axis.remap("S", [i])
                    B[vi] = A[vi]

    return Copy


def copy_schedule(n: int, threads: int, vector: int = 1, per_thread: int = 1) -> tvm.s_tir.Schedule:
    """One element per thread (vector=1, per_thread=1); a float4 per thread (vector=4); or a
    serial loop over `per_thread` coalesced chunks (block-stride) inside each thread."""
    sch = tvm.s_tir.Schedule(copy_module(n))
    (i,) = sch.get_loops(sch.get_sblock("B"))
    if per_thread > 1:
        bx, j, tx, v = sch.split(i, [None, per_thread, threads, vector])
    else:
        bx, tx, v = sch.split(i, [None, threads, vector])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    if vector > 1:
        sch.vectorize(v)
    return sch


def log2(n: int) -> int:
    return n.bit_length() - 1


def variants():
    out = []
    for n in SIZES:
        for t in THREADS if n in (1 << 24, 1 << 26, 1 << 28) else [256]:
            out.append((f"copy 2^{log2(n)} t{t}", n, dict(threads=t)))
    for n in (1 << 26, 1 << 28):
        for t in (128, 256, 512):
            out.append((f"copy 2^{log2(n)} t{t} float4", n, dict(threads=t, vector=4)))
        out.append((f"copy 2^{log2(n)} t256 4/thread", n, dict(threads=256, per_thread=4)))
    return out


class Row:
    def __init__(self, name, ms=None, gbps=None, tflops=None, err=None, ref=None, note=""):
        self.name, self.ms, self.gbps, self.tflops, self.err, self.ref, self.note = name, ms, gbps, tflops, err, ref, note


def fmt_table(rows) -> str:
    head = ("variant", "ms", "GB/s", "TFLOP/s", "rel err", "% of ref", "note")
    lines = [head]
    for r in rows:
        lines.append((
            r.name,
            f"{r.ms:.4f}" if r.ms else "-",
            f"{r.gbps:,.0f}" if r.gbps else "",
            f"{r.tflops:,.1f}" if r.tflops else "",
            f"{r.err:.1e}" if r.err is not None else "",
            r.ref or "",
            r.note,
        ))
    w = [max(len(x[i]) for x in lines) for i in range(len(head))]
    text = ["  ".join(c.ljust(k) for c, k in zip(x, w)).rstrip() for x in lines]
    text.insert(1, "  ".join("-" * k for k in w))
    return "\n".join(text)


def dry() -> int:
    t0 = time.time()
    failed = 0
    for name, n, kw in variants():
        try:
            helpers.cuda_source(copy_schedule(n, **kw))
            print(f"built {name}")
        except Exception as err:  # report, keep going
            failed += 1
            print(f"FAILED {name}: {type(err).__name__}: {err}")
    print(f"dry run: {len(variants()) - failed} built, {failed} failed, {time.time() - t0:.1f} s")
    return 1 if failed else 0


def main() -> int:
    t_start = time.time()
    s = bench.Session("00_gpu_architecture", quiet=True)
    spec, dev = s.spec, helpers.device()
    print(f"GPU {spec.name}, {spec.sm_count} SMs @ {spec.clock_mhz:.0f} MHz, L2 {spec.l2_bytes / 2**20:.0f} MiB, "
          f"peak fp32 {spec.peak_fp32_tflops:.1f} TFLOP/s, fp16 TC {spec.peak_fp16_tc_tflops:.0f} TFLOP/s, "
          f"DRAM {spec.dram_gbps} GB/s", flush=True)
    rows: list[Row] = []
    rng = np.random.default_rng(0)
    data = {}

    def host(n):
        if n not in data:
            data.clear()
            data[n] = rng.standard_normal(n, dtype=np.float32)
        return data[n]

    # ---- TensorIR copies
    for name, n, kw in variants():
        try:
            a = host(n)
            ex = helpers.build(copy_schedule(n, **kw))
            A = tvm.runtime.tensor(a, dev)
            B = tvm.runtime.tensor(np.full(n, np.nan, np.float32), dev)
            ex.mod["main"](A, B)
            dev.sync()
            b = B.numpy()
            err = 0.0 if np.array_equal(a, b) else float(np.linalg.norm(np.nan_to_num(b - a, nan=1e30)) / np.linalg.norm(a))
            if err:
                rows.append(Row(name, err=err, note="WRONG, not timed"))
                continue
            ms = statistics.median(helpers.time_function(ex.mod, dev, [A, B], repeat=20))
            gbps = 2 * n * 4 / (ms * 1e-3) / 1e9
            rows.append(Row(name, ms, gbps, err=err, ref=f"{gbps / spec.dram_gbps:.0%} DRAM",
                            note="fits in L2" if 2 * n * 4 <= spec.l2_bytes else ""))
            del A, B
        except Exception as err:
            rows.append(Row(name, note=f"FAILED {type(err).__name__}: {str(err).splitlines()[0][:80]}"))
            traceback.print_exc()
        print(rows[-1].name, rows[-1].gbps, flush=True)
    data.clear()

    # ---- torch device-to-device copy
    try:
        import torch

        for n in SIZES:
            a = torch.randn(n, device="cuda")
            b = torch.empty_like(a)
            ms = bench.event_median_ms(lambda: b.copy_(a), torch.cuda.Event, torch.cuda.synchronize, 20, 3)
            err = 0.0 if torch.equal(a, b) else float((a - b).norm() / a.norm())
            gbps = 2 * n * 4 / (ms * 1e-3) / 1e9
            rows.append(Row(f"torch copy_ 2^{log2(n)}", ms, gbps, err=err, ref=f"{gbps / spec.dram_gbps:.0%} DRAM"))
            del a, b
    except Exception as err:
        rows.append(Row("torch copy_", note=f"FAILED {type(err).__name__}: {err}"))

    # ---- cuBLAS
    cublas = {}
    for M, dtype, tf32 in [(4096, "float32", False), (4096, "float32", True), (4096, "float16", False),
                           (8192, "float32", False), (8192, "float16", False), (4096, "bfloat16", False)]:
        label = f"cuBLAS {'tf32' if tf32 else dtype} {M}^3"
        try:
            import torch

            if tf32:
                torch.backends.cuda.matmul.allow_tf32 = True
                x = torch.randn(M, M, device="cuda")
                y = torch.randn(M, M, device="cuda")
                z = torch.empty(M, M, device="cuda")
                ms = bench.event_median_ms(lambda: torch.matmul(x, y, out=z), torch.cuda.Event, torch.cuda.synchronize, 20, 3)
                torch.backends.cuda.matmul.allow_tf32 = False
                ref64 = x.double() @ y.double()
                err = float((z.double() - ref64).norm() / ref64.norm())
                del x, y, z, ref64
            else:
                ms = helpers.cublas_time(M, M, M, dtype)
                err = None
            tf = 2 * M**3 / (ms * 1e-3) / 1e12
            peak = spec.peak_fp32_tflops if dtype == "float32" and not tf32 else spec.peak_fp16_tc_tflops
            cublas[label] = tf
            rows.append(Row(label, ms, tflops=tf, err=err,
                            ref=f"{tf / peak:.0%} {'fp32' if peak == spec.peak_fp32_tflops else 'fp16 TC'} peak"))
        except Exception as err:
            rows.append(Row(label, note=f"FAILED {type(err).__name__}: {err}"))

    # ---- notebook 00's own measurements, under its names, through the notebook's own path
    records = {}
    try:
        n, t = NOTEBOOK_SIZE, NOTEBOOK_THREADS
        a = rng.standard_normal(n, dtype=np.float32)
        for name, vector in [(f"copy 2^{log2(n)} floats", 1), (f"copy 2^{log2(n)} floats, float4", 4)]:
            params = {"threads": t} if vector == 1 else {"threads": t, "vector": vector}
            m = s.measure(name, copy_schedule(n, t, vector=vector), [a, np.empty_like(a)], lambda: a,
                          bytes=2 * a.nbytes, params=params, quiet=True)
            records[m.name] = m.to_record()
            rows.append(Row(f"notebook path: {name}", m.ms, m.gbps, err=m.rel_err))
        for dtype in ("float32", "float16"):
            m = s.cublas_matmul(4096, 4096, 4096, dtype, quiet=True)
            records[m.name] = m.to_record()
            rows.append(Row(f"notebook path: {m.name}", m.ms, tflops=m.tflops))
    except Exception as err:
        rows.append(Row("notebook path", note=f"FAILED {type(err).__name__}: {err}"))
        traceback.print_exc()

    print()
    print(fmt_table(rows))
    print(f"\ntotal {time.time() - t_start:.0f} s")
    print("RECORDS_JSON " + json.dumps({"device": spec.to_dict(), "measurements": records}))
    return 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dry", action="store_true", help="only build every TensorIR variant (no GPU needed)")
    args = ap.parse_args()
    sys.exit(dry() if args.dry else main())
