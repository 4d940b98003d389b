"""Notebooks 01 (vector add) and 02 (window sum), explored broadly on one GPU.

    python gpu/experiments/01_02_bandwidth.py sweep                # on a GPU: build, check, time, one table
    python gpu/experiments/01_02_bandwidth.py sweep --dry          # anywhere: only build every variant
    python gpu/experiments/01_02_bandwidth.py dram-traffic         # on a GPU with Nsight Compute (ncu)

Every kernel is memory-bound, so everything is reported in GB/s of *minimal* DRAM traffic
(each array read or written once) and as a percentage of the best TensorIR copy at the same size
(the ceiling notebook 01 measures for itself).

sweep, one table in sections:
  A. copy B[i] = A[i] (the ceiling) at 2^24: vector width 1/4, threads 128..1024, elements per thread
  B. vector add C = A + B at 2^24: threads per block 32..1024 x vector width 1/2/4
  C. vector add at 2^24 with several elements per thread, coalesced (block-stride) and blocked
     (each thread a contiguous chunk)
  D. sizes 2^20..2^26 for the naive and the vectorized add and the copy (where L2 stops helping)
  E. window sum B[i] = A[i] + A[i+1] + A[i+2] at 2^24, without and with shared memory
     (cache_read + compute_at + cooperative fetch) at tiles of 128..1024 outputs, and with
     several outputs per thread
  F. torch's copy_ and add at 2^24 as vendor references
A failing variant is reported, not fatal; past ~200 s the remaining variants are skipped.

dram-traffic: Nsight Compute's DRAM bytes and L1/L2 hit rates of the window sums (global and
shared) and of the add, cold caches: does L1 already capture the window's reuse? (notebook 02)
"""

from __future__ import annotations

import statistics
import sys
import time
import traceback

import numpy as np
import tvm
from tvm import s_tir
from tvm.script import ir as I
from tvm.script import tirx as T

import helpers
from ncu import ncu_raw, under_ncu
from schedules import copy_module
from study import Study, cli, error_line, table
from variants import Variant, dry_run
from helpers import baselines

N24 = 1 << 24
BUDGET_S = 200  # the sweep starts no new variant after this many seconds


# ------------------------------------------------------------------ the kernels


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


def kind_of(v: Variant) -> str:
    """copy, add or window: the first word of every variant's name."""
    return v.name.split()[0]


def minimal_bytes(kind: str, n: int) -> int:
    return {"copy": 2 * n * 4, "add": 3 * n * 4, "window": (2 * n + 2) * 4}[kind]


def variants() -> dict[str, list[Variant]]:
    """The TensorIR variants of each section of the sweep (A-E)."""
    out = {section: [] for section in "ABCDE"}

    def add(section, name, n, fn, **kw):
        out[section].append(Variant(name, lambda: fn(n=n, **kw), (n,)))

    # A. copy ceiling at 2^24
    for v in (1, 4):
        for t in (128, 256, 512, 1024):
            add("A", f"copy 2^24 t{t} v{v}", N24, schedule_1d, kind="copy", threads=t, vector=v)
    for t, v, p in [(256, 4, 2), (256, 4, 4), (512, 4, 2), (128, 4, 4), (256, 1, 4)]:
        add("A", f"copy 2^24 t{t} v{v} x{p}", N24, schedule_1d, kind="copy", threads=t, vector=v, per_thread=p)
    # B. vector add: threads per block x vector width
    for v in (1, 2, 4):
        for t in (32, 64, 128, 256, 512, 1024):
            add("B", f"add 2^24 t{t} v{v}", N24, schedule_1d, kind="add", threads=t, vector=v)
    # C. several elements per thread, coalesced and blocked
    for t in (128, 256, 512):
        for v in (1, 4):
            for p in (2, 4, 8):
                add("C", f"add 2^24 t{t} v{v} x{p}", N24, schedule_1d, kind="add", threads=t, vector=v, per_thread=p)
    add("C", "add 2^24 t256 v1 x16", N24, schedule_1d, kind="add", threads=256, per_thread=16)
    for v, p in [(1, 4), (1, 16), (4, 4)]:
        add("C", f"add 2^24 t256 v{v} x{p} blocked", N24, schedule_1d, kind="add", threads=256, vector=v,
            per_thread=p, layout="blocked")
    # D. sizes
    for e in (20, 21, 22, 23, 24, 25, 26):
        n = 1 << e
        add("D", f"copy 2^{e} t256 v4", n, schedule_1d, kind="copy", threads=256, vector=4)
        add("D", f"add 2^{e} t256 v1", n, schedule_1d, kind="add", threads=256)
        add("D", f"add 2^{e} t256 v4", n, schedule_1d, kind="add", threads=256, vector=4)
    # E. window sum without / with shared memory
    for t in (128, 256, 512, 1024):
        add("E", f"window 2^24 t{t} global", N24, schedule_1d, kind="window", threads=t)
        add("E", f"window 2^24 t{t} shared", N24, schedule_window_shared, threads=t)
    for t, p in [(128, 4), (256, 4), (256, 8), (512, 4), (1024, 4)]:
        add("E", f"window 2^24 t{t} x{p} global", N24, schedule_1d, kind="window", threads=t, per_thread=p)
        add("E", f"window 2^24 t{t} x{p} shared", N24, schedule_window_shared, threads=t, per_thread=p)
    return out


def all_variants() -> list[Variant]:
    return [v for section in variants().values() for v in section]


# ------------------------------------------------------------------ the sweep


class Data:
    """Host inputs, reference and device arrays for one (kind, n), kept while it is in use."""

    def __init__(self, dev):
        self.dev, self.key, self.rng = dev, None, np.random.default_rng(0)

    def get(self, kind, n):
        if self.key != (kind, n):
            self.key = self.args = None  # free the previous arrays before making the next
            m = n + 2 if kind == "window" else n
            a = self.rng.random(m, dtype=np.float32)
            if kind == "copy":
                ins, self.ref = [a], a
            elif kind == "add":
                b = self.rng.random(n, dtype=np.float32)
                ins, self.ref = [a, b], a + b
            else:
                ins, self.ref = [a], a[:-2] + a[1:-1] + a[2:]
            self.nan = np.full(n, np.nan, np.float32)
            self.args = [tvm.runtime.tensor(x, self.dev) for x in ins] + [tvm.runtime.tensor(self.nan, self.dev)]
            self.key = (kind, n)
        return self.args


def rel_err(out: np.ndarray, ref: np.ndarray) -> float:
    d = (out - ref).astype(np.float64)
    return float(np.sqrt(np.dot(d, d)) / np.sqrt(np.dot(ref.astype(np.float64), ref.astype(np.float64))))


def run_variant(dev, data, v: Variant, repeat=10):
    """Build, check on a poisoned output, time. Returns (ms or None if wrong, rel err)."""
    _, ex = v.build()
    args = data.get(kind_of(v), v.shape[0])
    args[-1].copyfrom(data.nan)
    ex.mod["main"](*args)
    dev.sync()
    err = rel_err(args[-1].numpy(), data.ref)
    if not err <= 1e-6:
        return None, err
    ms = statistics.median(helpers.time_function(ex.mod, dev, args, repeat=repeat, warmup=2, min_repeat_ms=10))
    return ms, err


def torch_refs():
    """(name, kind, n, ms, rel err) of torch's copy_, add and a two-kernel window sum at 2^24."""
    rows = []
    try:
        import torch

        n = N24
        a = torch.rand(n, device="cuda")
        b = torch.rand(n, device="cuda")
        c = torch.empty_like(a)
        ms = baselines.event_median_ms(lambda: c.copy_(a), torch.cuda.Event, torch.cuda.synchronize, 20, 3)
        err = 0.0 if torch.equal(a, c) else float((a - c).norm() / a.norm())
        rows.append(("torch copy_ 2^24", "copy", n, ms, err))
        ms = baselines.event_median_ms(lambda: torch.add(a, b, out=c), torch.cuda.Event, torch.cuda.synchronize, 20, 3)
        err = float((c - (a + b)).norm() / (a + b).norm())
        rows.append(("torch add 2^24", "add", n, ms, err))
        w = torch.empty(n, device="cuda")
        a2 = torch.rand(n + 2, device="cuda")

        def window():
            torch.add(a2[:-2], a2[1:-1], out=w)
            w.add_(a2[2:])

        ms = baselines.event_median_ms(window, torch.cuda.Event, torch.cuda.synchronize, 20, 3)
        rows.append(("torch window (2 kernels) 2^24", "window", n, ms, None))
        del a, b, c, w, a2
        torch.cuda.empty_cache()
    except Exception as err:  # noqa: BLE001
        rows.append((f"torch: {error_line(err, 60)}", None, None, None, None))
    return rows


def sweep(args) -> int:
    if args.dry:
        return dry_run(all_variants())
    t_start = time.time()
    dev = helpers.device()
    spec = helpers.local_gpu_spec()
    print(f"GPU {spec.name}, {spec.sm_count} SMs @ {spec.clock_mhz:.0f} MHz, L2 {spec.l2_bytes / 2**20:.0f} MiB, "
          f"DRAM {spec.dram_gbps} GB/s (theoretical), TVM {tvm.__version__}", flush=True)
    data = Data(dev)
    measured = {}  # variant name: (section, n, ms, GB/s, rel err, note)
    best_copy: dict[int, float] = {}  # n: best TensorIR copy GB/s
    section_of = {v.name: s for s, vs in variants().items() for v in vs}
    # copies first (they set the ceiling), then everything else grouped by (kind, n)
    order = sorted(all_variants(), key=lambda v: (kind_of(v) != "copy", v.shape[0], kind_of(v), section_of[v.name]))
    for v in order:
        section, kind, n = section_of[v.name], kind_of(v), v.shape[0]
        if time.time() - t_start > BUDGET_S:
            measured[v.name] = (section, n, None, None, None, "skipped (time budget)")
            continue
        try:
            ms, err = run_variant(dev, data, v)
            if ms is None:
                measured[v.name] = (section, n, None, None, err, "WRONG, not timed")
                continue
            gbps = minimal_bytes(kind, n) / (ms * 1e-3) / 1e9
            if kind == "copy":
                best_copy[n] = max(best_copy.get(n, 0.0), gbps)
            measured[v.name] = (section, n, ms, gbps, err, "fits in L2" if minimal_bytes(kind, n) <= spec.l2_bytes else "")
        except Exception as err:  # noqa: BLE001 (report it, measure the rest)
            measured[v.name] = (section, n, None, None, None, f"FAILED {error_line(err, 80)}")
            traceback.print_exc()
    data.key = data.args = None
    for name, kind, n, ms, err in torch_refs():
        measured[name] = ("F", N24, ms, minimal_bytes(kind, n) / (ms * 1e-3) / 1e9 if ms else None, err,
                          "" if ms else "FAILED")
    rows = [("sec", "variant", "ms", "GB/s", "rel err", "% best copy", "note")]
    best = {}  # section: (GB/s, name, % of best copy)
    for name, (section, n, ms, gbps, err, note) in sorted(measured.items(), key=lambda item: item[1][0]):
        pct = gbps / best_copy[n] if gbps and n in best_copy else None
        rows.append((section, name, f"{ms:.4f}" if ms else "-", f"{gbps:,.0f}" if gbps else "",
                     f"{err:.1e}" if err is not None else "", f"{pct:.1%}" if pct is not None else "", note))
        if gbps and section in "BCE" and gbps > best.get(section, (0,))[0]:
            best[section] = (gbps, name, pct)
    print()
    table(rows)
    for n in sorted(best_copy):
        print(f"best TensorIR copy 2^{log2(n)}: {best_copy[n]:,.0f} GB/s")
    for section, (gbps, name, pct) in sorted(best.items()):
        print(f"best of section {section}: {name} {gbps:,.0f} GB/s ({pct:.1%} of best copy)")
    skipped = sum(m[5].startswith("skipped") for m in measured.values())
    print(f"{skipped} variants skipped; total {time.time() - t_start:.0f} s")
    return 0


# ------------------------------------------------------------------ Nsight Compute

NCU_METRICS = ["dram__bytes_read.sum", "dram__bytes_write.sum", "l1tex__t_sector_hit_rate.pct",
               "lts__t_sector_hit_rate.pct", "gpu__time_duration.sum"]
NCU_VARIANTS = ["window 2^24 t256 global", "window 2^24 t256 shared", "add 2^24 t256 v1", "add 2^24 t256 v4"]


def launch(args) -> int:
    """Run one variant three times, for ncu to profile the last launch."""
    found = [v for v in all_variants() if v.name == args.variant]
    if not found:
        print(f"no variant {args.variant!r}", file=sys.stderr)
        return 2
    dev = helpers.device()
    _, ex = found[0].build()
    fn_args = Data(dev).get(kind_of(found[0]), found[0].shape[0])
    for _ in range(3):
        ex.mod["main"](*fn_args)
    dev.sync()
    return 0


def parse_ncu_csv(text: str) -> dict:
    """NCU_METRICS as "value unit" strings, from ncu's raw CSV."""
    found = ncu_raw(text)
    return {m: f"{found[m][0]} {found[m][1]}".strip() for m in NCU_METRICS if m in found}


def dram_traffic(args) -> int:
    t_start = time.time()
    options = ["--metrics", ",".join(NCU_METRICS), "--launch-skip", "2", "--launch-count", "1", "--csv", "--page", "raw"]
    for name in NCU_VARIANTS:
        try:
            proc = under_ncu(__file__, options, ["launch", name], timeout=60)
        except Exception as err:  # noqa: BLE001 (a timeout, most likely)
            print(f"ncu {name}: {error_line(err)}")
            continue
        values = parse_ncu_csv(proc.stdout)
        if values:
            print(f"ncu {name}: " + ", ".join(f"{k}={v}" for k, v in values.items()))
        else:
            tail = " | ".join(line.strip() for line in (proc.stdout + proc.stderr).strip().splitlines()[-3:])
            print(f"ncu {name}: no metrics (rc {proc.returncode}): {tail[:300]}")
    print(f"total {time.time() - t_start:.0f} s")
    return 0


STUDIES = {
    "sweep": Study(sweep, "copy, vector add and window sum over block sizes, vector widths, work per thread "
                   "and sizes, against torch", needs=()),
    "dram-traffic": Study(dram_traffic, "DRAM bytes and L1/L2 hit rates of the window sums and the add, "
                          "under Nsight Compute", dry=False, needs=("ncu",)),
    "launch": Study(launch, "(run by dram-traffic under ncu) launch one variant of the sweep three times",
                    dry=False, needs=(), logged=False,
                    arguments=((("variant",), dict(metavar="VARIANT", help="a variant's name, e.g. 'add 2^24 t256 v1'")),)),
}

if __name__ == "__main__":
    sys.exit(cli(__file__, __doc__, STUDIES))
