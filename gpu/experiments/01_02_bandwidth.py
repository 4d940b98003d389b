"""Notebooks 01 (vector add) and 02 (window sum), explored broadly on one GPU.

    python gpu/experiments/01_02_bandwidth.py          # on a GPU: build, check, time, one table
    python gpu/experiments/01_02_bandwidth.py --dry    # anywhere: only build every variant

Every kernel is memory-bound, so everything is reported in GB/s of *minimal* DRAM traffic
(each array read or written once) and as a percentage of the best TensorIR copy at the same size
(the ceiling notebook 01 measures for itself). What it explores:

  A. copy B[i] = A[i] (the ceiling): vector width 1/4, threads 128..1024, elements per thread
  B. vector add C = A + B at 2^24: threads per block 32..1024 x vector width 1/2/4
  C. vector add at 2^24 with several elements per thread, coalesced (block-stride) and blocked
     (each thread a contiguous chunk)
  D. sizes 2^20..2^26 for the naive and the vectorized add and the copy (where L2 stops helping)
  E. window sum B[i] = A[i] + A[i+1] + A[i+2] at 2^24, without and with shared memory
     (cache_read + compute_at + cooperative fetch) at tiles of 128..1024 outputs, and with
     several outputs per thread
  F. torch's copy_ and add at 2^24 as vendor references
  G. if Nsight Compute (ncu) is present and allowed: DRAM bytes and L1/L2 hit rates of the
     window sums and the add, cold caches (does L1 already capture the window's reuse?)

It prints one table at the end (then the ncu lines, if any); a failing variant is reported, not
fatal. Total run time is kept under ~4 minutes (later sections are skipped past a budget).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
import traceback

import numpy as np
import tvm
from tvm import s_tir
from tvm.script import ir as I
from tvm.script import tirx as T

import helpers
from helpers import bench

N24 = 1 << 24
BUDGET_S = 200  # stop starting new sections after this many seconds (ncu gets its own check)


# ------------------------------------------------------------------ the kernels


def copy_module(n: int) -> tvm.IRModule:
    @I.ir_module
    class Copy:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((n,), "float32"), B: T.Buffer((n,), "float32")):
            T.func_attr({"tirx.noalias": True})
            for i in range(n):
                with T.sblock("B"):
                    vi = T.axis.spatial(n, i)
                    B[vi] = A[vi]

    return Copy


def add_module(n: int) -> tvm.IRModule:
    @I.ir_module
    class VecAdd:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((n,), "float32"), B: T.Buffer((n,), "float32"), C: T.Buffer((n,), "float32")):
            T.func_attr({"tirx.noalias": True})
            for i in range(n):
                with T.sblock("C"):
                    vi = T.axis.spatial(n, i)
                    C[vi] = A[vi] + B[vi]

    return VecAdd


def window_module(n: int) -> tvm.IRModule:
    @I.ir_module
    class WindowSum:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((n + 2,), "float32"), B: T.Buffer((n,), "float32")):
            T.func_attr({"tirx.noalias": True})
            for i in range(n):
                with T.sblock("B"):
                    vi = T.axis.spatial(n, i)
                    B[vi] = A[vi] + A[vi + 1] + A[vi + 2]

    return WindowSum


MODULES = {"copy": (copy_module, "B"), "add": (add_module, "C"), "window": (window_module, "B")}


def schedule_1d(kind: str, n: int, threads: int, vector: int = 1, per_thread: int = 1,
                layout: str = "coalesced") -> s_tir.Schedule:
    """Split the one loop over blocks, threads, `per_thread` steps and a `vector`-wide access.

    coalesced: in step k the threads of a block touch one contiguous run of threads*vector
               elements (block-stride), i = ((bx*per_thread + k)*threads + tx)*vector + v
    blocked:   each thread owns a contiguous chunk of per_thread*vector elements,
               i = ((bx*threads + tx)*per_thread + k)*vector + v
    """
    make, block = MODULES[kind]
    sch = s_tir.Schedule(make(n))
    (i,) = sch.get_loops(sch.get_sblock(block))
    if layout == "coalesced":
        bx, k, tx, v = sch.split(i, [None, per_thread, threads, vector])
        sch.reorder(bx, tx, k, v)
    elif layout == "blocked":
        bx, tx, k, v = sch.split(i, [None, threads, per_thread, vector])
    else:
        raise ValueError(f"layout must be 'coalesced' or 'blocked', got {layout!r}")
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    if per_thread > 1:
        sch.unroll(k)
    if vector > 1:
        sch.vectorize(v)
    return sch


def schedule_window_shared(n: int, threads: int, per_thread: int = 1) -> s_tir.Schedule:
    """Window sum with the block's tile of A (threads*per_thread + 2 elements, the halo
    included) staged in shared memory, fetched cooperatively by all threads of the block."""
    sch = s_tir.Schedule(window_module(n))
    blk = sch.get_sblock("B")
    (i,) = sch.get_loops(blk)
    bx, k, tx = sch.split(i, [None, per_thread, threads])
    sch.reorder(bx, tx, k)
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    if per_thread > 1:
        sch.unroll(k)
    a_shared = sch.cache_read(blk, 0, "shared")
    sch.compute_at(a_shared, tx)
    fetch = sch.get_loops(a_shared)[-1]
    _, ftx = sch.split(fetch, [None, threads])
    sch.bind(ftx, "threadIdx.x")
    return sch


# ------------------------------------------------------------------ the variants


def log2(n: int) -> int:
    return n.bit_length() - 1


def minimal_bytes(kind: str, n: int) -> int:
    return {"copy": 2 * n * 4, "add": 3 * n * 4, "window": (2 * n + 2) * 4}[kind]


def variants():
    """(section, name, kind, n, build) for every TensorIR variant."""
    out = []

    def add(section, name, data_kind, size, fn, **kw):
        out.append((section, name, data_kind, size, lambda: fn(**kw)))

    # A. copy ceiling at 2^24
    for v in (1, 4):
        for t in (128, 256, 512, 1024):
            add("A", f"copy 2^24 t{t} v{v}", "copy", N24, schedule_1d, kind="copy", n=N24, threads=t, vector=v)
    for t, v, p in [(256, 4, 2), (256, 4, 4), (512, 4, 2), (128, 4, 4), (256, 1, 4)]:
        add("A", f"copy 2^24 t{t} v{v} x{p}", "copy", N24, schedule_1d, kind="copy", n=N24, threads=t, vector=v,
            per_thread=p)
    # B. vector add: threads per block x vector width
    for v in (1, 2, 4):
        for t in (32, 64, 128, 256, 512, 1024):
            add("B", f"add 2^24 t{t} v{v}", "add", N24, schedule_1d, kind="add", n=N24, threads=t, vector=v)
    # C. several elements per thread, coalesced and blocked
    for t in (128, 256, 512):
        for v in (1, 4):
            for p in (2, 4, 8):
                add("C", f"add 2^24 t{t} v{v} x{p}", "add", N24, schedule_1d, kind="add", n=N24, threads=t,
                    vector=v, per_thread=p)
    add("C", "add 2^24 t256 v1 x16", "add", N24, schedule_1d, kind="add", n=N24, threads=256, per_thread=16)
    for v, p in [(1, 4), (1, 16), (4, 4)]:
        add("C", f"add 2^24 t256 v{v} x{p} blocked", "add", N24, schedule_1d, kind="add", n=N24, threads=256,
            vector=v, per_thread=p, layout="blocked")
    # D. sizes
    for e in (20, 21, 22, 23, 24, 25, 26):
        n = 1 << e
        add("D", f"copy 2^{e} t256 v4", "copy", n, schedule_1d, kind="copy", n=n, threads=256, vector=4)
        add("D", f"add 2^{e} t256 v1", "add", n, schedule_1d, kind="add", n=n, threads=256)
        add("D", f"add 2^{e} t256 v4", "add", n, schedule_1d, kind="add", n=n, threads=256, vector=4)
    # E. window sum without / with shared memory
    for t in (128, 256, 512, 1024):
        add("E", f"window 2^24 t{t} global", "window", N24, schedule_1d, kind="window", n=N24, threads=t)
        add("E", f"window 2^24 t{t} shared", "window", N24, schedule_window_shared, n=N24, threads=t)
    for t, p in [(128, 4), (256, 4), (256, 8), (512, 4), (1024, 4)]:
        add("E", f"window 2^24 t{t} x{p} global", "window", N24, schedule_1d, kind="window", n=N24, threads=t,
            per_thread=p)
        add("E", f"window 2^24 t{t} x{p} shared", "window", N24, schedule_window_shared, n=N24, threads=t,
            per_thread=p)
    return out


# ------------------------------------------------------------------ running


class Row:
    def __init__(self, section, name, ms=None, gbps=None, err=None, pct=None, note=""):
        self.section, self.name, self.ms, self.gbps, self.err, self.pct, self.note = (
            section, name, ms, gbps, err, pct, note)


def fmt_table(rows) -> str:
    head = ("sec", "variant", "ms", "GB/s", "rel err", "% best copy", "note")
    lines = [head]
    for r in rows:
        lines.append((
            r.section, r.name,
            f"{r.ms:.4f}" if r.ms else "-",
            f"{r.gbps:,.0f}" if r.gbps else "",
            f"{r.err:.1e}" if r.err is not None else "",
            f"{r.pct:.1%}" if r.pct is not None else "",
            r.note,
        ))
    w = [max(len(x[i]) for x in lines) for i in range(len(head))]
    text = ["  ".join(c.ljust(k) for c, k in zip(x, w)).rstrip() for x in lines]
    text.insert(1, "  ".join("-" * k for k in w))
    return "\n".join(text)


def dry() -> int:
    t0 = time.time()
    failed = 0
    vs = variants()
    for section, name, kind, n, make in vs:
        try:
            helpers.cuda_source(make())
        except Exception as err:  # report, keep going
            failed += 1
            print(f"FAILED {name}: {type(err).__name__}: {err}")
    print(f"dry run: {len(vs) - failed} of {len(vs)} variants built, {failed} failed, {time.time() - t0:.1f} s")
    return 1 if failed else 0


class Data:
    """Host inputs, references and device arrays for one (kind, n), kept while it is in use."""

    def __init__(self, dev):
        self.dev, self.key, self.rng = dev, None, np.random.default_rng(0)

    def get(self, kind, n):
        if self.key != (kind, n):
            self.key = None
            self.args = None
            m = n + 2 if kind == "window" else n
            a = self.rng.random(m, dtype=np.float32)
            if kind == "copy":
                ins, ref = [a], a
            elif kind == "add":
                b = self.rng.random(n, dtype=np.float32)
                ins, ref = [a, b], a + b
            else:
                ins, ref = [a], a[:-2] + a[1:-1] + a[2:]
            self.nan = np.full(n, np.nan, np.float32)
            self.ref = ref
            self.args = [tvm.runtime.tensor(x, self.dev) for x in ins] + [tvm.runtime.tensor(self.nan, self.dev)]
            self.key = (kind, n)
        return self.args


def rel_err(out: np.ndarray, ref: np.ndarray) -> float:
    d = (out - ref).astype(np.float64)
    return float(np.sqrt(np.dot(d, d)) / np.sqrt(np.dot(ref.astype(np.float64), ref.astype(np.float64))))


def run_variant(dev, data, name, kind, n, make, repeat=10):
    """Build, check on a poisoned output, time. Returns (ms, rel err) or raises."""
    ex = helpers.build(make())
    args = data.get(kind, n)
    args[-1].copyfrom(data.nan)
    ex.mod["main"](*args)
    dev.sync()
    err = rel_err(args[-1].numpy(), data.ref)
    if not err <= 1e-6:
        return None, err
    ms = statistics.median(helpers.time_function(ex.mod, dev, args, repeat=repeat, warmup=2, min_repeat_ms=10))
    return ms, err


def torch_refs(spec):
    rows = []
    try:
        import torch

        n = N24
        a = torch.rand(n, device="cuda")
        b = torch.rand(n, device="cuda")
        c = torch.empty_like(a)
        ms = bench.event_median_ms(lambda: c.copy_(a), torch.cuda.Event, torch.cuda.synchronize, 20, 3)
        err = 0.0 if torch.equal(a, c) else float((a - c).norm() / a.norm())
        rows.append(("torch copy_ 2^24", "copy", n, ms, err))
        ms = bench.event_median_ms(lambda: torch.add(a, b, out=c), torch.cuda.Event, torch.cuda.synchronize, 20, 3)
        err = float((c - (a + b)).norm() / (a + b).norm())
        rows.append(("torch add 2^24", "add", n, ms, err))
        w = torch.empty(n, device="cuda")
        a2 = torch.rand(n + 2, device="cuda")

        def window():
            torch.add(a2[:-2], a2[1:-1], out=w)
            w.add_(a2[2:])

        ms = bench.event_median_ms(window, torch.cuda.Event, torch.cuda.synchronize, 20, 3)
        rows.append(("torch window (2 kernels) 2^24", "window", n, ms, None))
        del a, b, c, w, a2
        torch.cuda.empty_cache()
    except Exception as err:
        rows.append((f"torch: {type(err).__name__}: {str(err)[:60]}", None, None, None, None))
    return rows


# ------------------------------------------------------------------ Nsight Compute

NCU_METRICS = ["dram__bytes_read.sum", "dram__bytes_write.sum", "l1tex__t_sector_hit_rate.pct",
               "lts__t_sector_hit_rate.pct", "gpu__time_duration.sum"]
NCU_VARIANTS = ["window 2^24 t256 global", "window 2^24 t256 shared", "add 2^24 t256 v1", "add 2^24 t256 v4"]


def profile_one(name: str) -> int:
    """Run one variant a few times (for ncu to pick the last launch)."""
    dev = helpers.device()
    for _, vname, kind, n, make in variants():
        if vname == name:
            data = Data(dev)
            ex = helpers.build(make())
            args = data.get(kind, n)
            for _ in range(3):
                ex.mod["main"](*args)
            dev.sync()
            return 0
    print(f"no variant {name!r}")
    return 2


def ncu_lines(deadline: float) -> list[str]:
    ncu = shutil.which("ncu")
    if ncu is None:
        return ["ncu: not found, no DRAM-traffic profile"]
    lines = []
    for name in NCU_VARIANTS:
        left = deadline - time.time()
        if left < 20:
            lines.append(f"ncu {name}: skipped (time budget)")
            continue
        cmd = [ncu, "--metrics", ",".join(NCU_METRICS), "--launch-skip", "2", "--launch-count", "1",
               "--csv", "--page", "raw", sys.executable, os.path.abspath(__file__), "--profile", name]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=min(60, left))
        except subprocess.TimeoutExpired:
            lines.append(f"ncu {name}: timed out")
            continue
        text = proc.stdout + proc.stderr
        vals = parse_ncu_csv(proc.stdout)
        if not vals:
            tail = " | ".join(line.strip() for line in text.strip().splitlines()[-3:])
            lines.append(f"ncu {name}: no metrics (rc {proc.returncode}): {tail[:300]}")
            continue
        lines.append(f"ncu {name}: " + ", ".join(f"{k}={v}" for k, v in vals.items()))
    return lines


def parse_ncu_csv(text: str) -> dict:
    import csv
    import io

    rows = [r for r in csv.reader(io.StringIO(text)) if r]
    for i, r in enumerate(rows):
        if "ID" in r and any(m in r for m in NCU_METRICS):
            head = r
            units = rows[i + 1] if i + 1 < len(rows) else []
            data = rows[i + 2] if i + 2 < len(rows) else []
            out = {}
            for m in NCU_METRICS:
                if m in head:
                    j = head.index(m)
                    unit = units[j] if j < len(units) else ""
                    out[m] = (data[j] if j < len(data) else "?") + (f" {unit}" if unit else "")
            return out
    return {}


# ------------------------------------------------------------------ main


def main() -> int:
    t_start = time.time()
    dev = helpers.device()
    spec = helpers.local_gpu_spec()
    print(f"GPU {spec.name}, {spec.sm_count} SMs @ {spec.clock_mhz:.0f} MHz, L2 {spec.l2_bytes / 2**20:.0f} MiB, "
          f"DRAM {spec.dram_gbps} GB/s (theoretical), TVM {tvm.__version__}", flush=True)
    data = Data(dev)
    rows: list[Row] = []
    best_copy: dict[int, float] = {}  # n -> best TensorIR copy GB/s
    # order: copies first (they set the ceiling), then everything else grouped by (kind, n)
    vs = variants()
    vs.sort(key=lambda v: (v[2] != "copy", v[3], v[2], v[0]))
    skipped = 0
    for section, name, kind, n, make in vs:
        if time.time() - t_start > BUDGET_S:
            rows.append(Row(section, name, note="skipped (time budget)"))
            skipped += 1
            continue
        try:
            ms, err = run_variant(dev, data, name, kind, n, make)
            if ms is None:
                rows.append(Row(section, name, err=err, note="WRONG, not timed"))
                continue
            gbps = minimal_bytes(kind, n) / (ms * 1e-3) / 1e9
            if kind == "copy":
                best_copy[n] = max(best_copy.get(n, 0.0), gbps)
            note = "fits in L2" if minimal_bytes(kind, n) <= spec.l2_bytes else ""
            rows.append(Row(section, name, ms, gbps, err, note=note))
        except Exception as err:
            rows.append(Row(section, name, note=f"FAILED {type(err).__name__}: {str(err).strip().splitlines()[-1][:80]}"))
            traceback.print_exc()
    data.args = None
    data.key = None
    for name, kind, n, ms, err in torch_refs(spec):
        if ms is None:
            rows.append(Row("F", name, note="FAILED"))
            continue
        rows.append(Row("F", name, ms, minimal_bytes(kind, n) / (ms * 1e-3) / 1e9, err))
    for r in rows:  # % of the best TensorIR copy of the same size
        n = next((v[3] for v in vs if v[1] == r.name), N24)
        if r.gbps and n in best_copy:
            r.pct = r.gbps / best_copy[n]
    order = "ABCDEF"
    rows.sort(key=lambda r: order.index(r.section))
    print()
    print(fmt_table(rows))
    for e in sorted(best_copy):
        print(f"best TensorIR copy 2^{log2(e)}: {best_copy[e]:,.0f} GB/s")
    for sec in "BCE":
        best = max((r for r in rows if r.section == sec and r.gbps), key=lambda r: r.gbps, default=None)
        if best:
            print(f"best of section {sec}: {best.name} {best.gbps:,.0f} GB/s ({best.pct:.1%} of best copy)")
    print(f"{skipped} variants skipped; TensorIR part took {time.time() - t_start:.0f} s", flush=True)
    for line in ncu_lines(t_start + 235):
        print(line)
    print(f"total {time.time() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dry", action="store_true", help="only build every TensorIR variant (no GPU needed)")
    ap.add_argument("--profile", metavar="VARIANT", help="(for ncu) run one variant three times")
    args = ap.parse_args()
    if args.profile:
        sys.exit(profile_one(args.profile))
    sys.exit(dry() if args.dry else main())
