"""Notebook 00's ceilings, measured broadly so that the notebook's choices are grounded.

    python gpu/experiments/00_ceilings.py sweep          # on a GPU: build, check, time, one table
    python gpu/experiments/00_ceilings.py sweep --dry    # anywhere: only build every TensorIR variant

sweep: bandwidth from a TensorIR copy B[i] = A[i] (bytes = read + written) at sizes from
L2-resident to far beyond L2 and at 64 to 1024 threads per block, a float4 copy and a copy with a
serial loop of several elements per thread, against torch's device-to-device copy; compute from
cuBLAS fp32 (TF32 off), TF32, fp16 and bf16 at 4096^3 (and 8192^3 for fp32/fp16). It ends with
one table, then one line `RECORDS_JSON {...}` holding the GPU's spec and the measurements under
the names notebook 00 uses, so that its recorded results come from a real run, never typed by hand.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
import traceback

import numpy as np
import tvm

import helpers
from schedules import copy_module
from study import Study, cli, error_line, table
from variants import Variant, dry_run
from helpers import baselines, bench

SIZES = [1 << 20, 1 << 22, 1 << 24, 1 << 26, 1 << 28]  # floats per array
THREADS = [64, 128, 256, 512, 1024]
NOTEBOOK_SIZE, NOTEBOOK_THREADS = 1 << 26, 256  # what notebook 00 measures (scalar and float4)


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


def copies() -> list[Variant]:
    def copy(name, n, **schedule):
        return Variant(name, lambda: copy_schedule(n, **schedule), (n,))

    out = []
    for n in SIZES:
        for t in THREADS if n in (1 << 24, 1 << 26, 1 << 28) else [256]:
            out.append(copy(f"copy 2^{log2(n)} t{t}", n, threads=t))
    for n in (1 << 26, 1 << 28):
        for t in (128, 256, 512):
            out.append(copy(f"copy 2^{log2(n)} t{t} float4", n, threads=t, vector=4))
        out.append(copy(f"copy 2^{log2(n)} t256 4/thread", n, threads=256, per_thread=4))
    return out


def row(name, ms=None, gbps=None, tflops=None, err=None, ref="", note=""):
    return (name, f"{ms:.4f}" if ms else "-", f"{gbps:,.0f}" if gbps else "", f"{tflops:,.1f}" if tflops else "",
            f"{err:.1e}" if err is not None else "", ref, note)


def tensorir_copies(spec, dev) -> list[tuple]:
    rows = []
    rng = np.random.default_rng(0)
    host = {}  # the input of the current size only
    for v in copies():
        n = v.shape[0]
        try:
            if n not in host:
                host = {n: rng.standard_normal(n, dtype=np.float32)}
            a = host[n]
            _, ex = v.build()
            A = tvm.runtime.tensor(a, dev)
            B = tvm.runtime.tensor(np.full(n, np.nan, np.float32), dev)
            ex.mod["main"](A, B)
            dev.sync()
            b = B.numpy()
            err = 0.0 if np.array_equal(a, b) else float(np.linalg.norm(np.nan_to_num(b - a, nan=1e30)) / np.linalg.norm(a))
            if err:
                rows.append(row(v.name, err=err, note="WRONG, not timed"))
                continue
            ms = statistics.median(helpers.time_function(ex.mod, dev, [A, B], repeat=20))
            gbps = 2 * n * 4 / (ms * 1e-3) / 1e9
            rows.append(row(v.name, ms, gbps, err=err, ref=f"{gbps / spec.dram_gbps:.0%} DRAM",
                            note="fits in L2" if 2 * n * 4 <= spec.l2_bytes else ""))
            del A, B
        except Exception as err:  # noqa: BLE001 (report it, measure the rest)
            rows.append(row(v.name, note=f"FAILED {error_line(err, 80)}"))
            traceback.print_exc()
        print(v.name, rows[-1][2], flush=True)
    return rows


def torch_copies(spec) -> list[tuple]:
    try:
        import torch

        rows = []
        for n in SIZES:
            a = torch.randn(n, device="cuda")
            b = torch.empty_like(a)
            ms = baselines.event_median_ms(lambda: b.copy_(a), torch.cuda.Event, torch.cuda.synchronize, 20, 3)
            err = 0.0 if torch.equal(a, b) else float((a - b).norm() / a.norm())
            gbps = 2 * n * 4 / (ms * 1e-3) / 1e9
            rows.append(row(f"torch copy_ 2^{log2(n)}", ms, gbps, err=err, ref=f"{gbps / spec.dram_gbps:.0%} DRAM"))
            del a, b
        return rows
    except Exception as err:  # noqa: BLE001
        return [row("torch copy_", note=f"FAILED {error_line(err)}")]


def cublas(spec) -> list[tuple]:
    rows = []
    for M, dtype, tf32 in [(4096, "float32", False), (4096, "float32", True), (4096, "float16", False),
                           (8192, "float32", False), (8192, "float16", False), (4096, "bfloat16", False)]:
        label = f"cuBLAS {'tf32' if tf32 else dtype} {M}^3"
        try:
            err = None
            if tf32:
                import torch

                torch.backends.cuda.matmul.allow_tf32 = True
                x, y, z = (torch.randn(M, M, device="cuda") for _ in range(3))
                ms = baselines.event_median_ms(lambda: torch.matmul(x, y, out=z), torch.cuda.Event,
                                           torch.cuda.synchronize, 20, 3)
                torch.backends.cuda.matmul.allow_tf32 = False
                ref64 = x.double() @ y.double()
                err = float((z.double() - ref64).norm() / ref64.norm())
                del x, y, z, ref64
            else:
                ms = helpers.cublas_time(M, M, M, dtype)
            tf = 2 * M**3 / (ms * 1e-3) / 1e12
            fp32 = dtype == "float32" and not tf32
            peak = spec.peak_fp32_tflops if fp32 else spec.peak_fp16_tc_tflops
            rows.append(row(label, ms, tflops=tf, err=err, ref=f"{tf / peak:.0%} {'fp32' if fp32 else 'fp16 TC'} peak"))
        except Exception as err:  # noqa: BLE001
            rows.append(row(label, note=f"FAILED {error_line(err)}"))
    return rows


def notebook_records(session) -> tuple[list[tuple], dict]:
    """Notebook 00's own measurements, under its names, measured through the notebook's own path (its
    kernels are `helpers.kernels.copy_kernel`'s, as `Session.copy_ceiling` times them)."""
    rows, records = [], {}
    try:
        n, t = NOTEBOOK_SIZE, NOTEBOOK_THREADS
        a = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
        for name, vector in [(f"copy 2^{log2(n)} floats", 1), (f"copy 2^{log2(n)} floats, float4", 4)]:
            params = {"threads": t} if vector == 1 else {"threads": t, "vector": vector}
            m = session.measure(name, helpers.kernels.copy_kernel(n, t, vector), [a, np.empty_like(a)], lambda: a,
                                bytes=2 * a.nbytes, params=params, quiet=True)
            records[m.name] = m.to_record()
            rows.append(row(f"notebook path: {name}", m.ms, m.gbps, err=m.rel_err))
        for dtype in ("float32", "float16"):
            m = session.cublas_matmul(4096, 4096, 4096, dtype, quiet=True)
            records[m.name] = m.to_record()
            rows.append(row(f"notebook path: {m.name}", m.ms, tflops=m.tflops))
    except Exception as err:  # noqa: BLE001
        rows.append(row("notebook path", note=f"FAILED {error_line(err)}"))
        traceback.print_exc()
    return rows, records


def sweep(args) -> int:
    if args.dry:
        return dry_run(copies())
    t_start = time.time()
    session = bench.Session("00_gpu_architecture", quiet=True)
    spec, dev = session.spec, helpers.device()
    print(f"GPU {spec.name}, {spec.sm_count} SMs @ {spec.clock_mhz:.0f} MHz, L2 {spec.l2_bytes / 2**20:.0f} MiB, "
          f"peak fp32 {spec.peak_fp32_tflops:.1f} TFLOP/s, fp16 TC {spec.peak_fp16_tc_tflops:.0f} TFLOP/s, "
          f"DRAM {spec.dram_gbps} GB/s", flush=True)
    rows = tensorir_copies(spec, dev) + torch_copies(spec) + cublas(spec)
    notebook_rows, records = notebook_records(session)
    print()
    table([("variant", "ms", "GB/s", "TFLOP/s", "rel err", "% of ref", "note"), *rows, *notebook_rows])
    print(f"\ntotal {time.time() - t_start:.0f} s")
    print("RECORDS_JSON " + json.dumps({"device": spec.to_dict(), "measurements": records}))
    return 0


STUDIES = {"sweep": Study(sweep, "copy bandwidth over sizes and block sizes, torch's copy, cuBLAS peaks",
                          needs=())}

if __name__ == "__main__":
    sys.exit(cli(__file__, __doc__, STUDIES))
