"""Notebook 09 (reductions: sum, softmax, layer norm), explored broadly on one GPU.

    python gpu/experiments/09_reductions.py ladder          # on a GPU: build, check, time, one table
    python gpu/experiments/09_reductions.py ladder --dry    # anywhere: only build every variant
    python gpu/experiments/09_reductions.py sweep           # row lengths 128..32768, fp16 and fp32
    python gpu/experiments/09_reductions.py tune            # a short MetaSchedule search on softmax
    python gpu/experiments/09_reductions.py copy-sizes      # the copy at 2^22..2^26 floats

Every kernel here is memory-bound, so each is reported in GB/s of minimal DRAM traffic (each
array read or written once) and as a share of notebook 00's copy timed in the same run; each
softmax and layer norm is also timed in rounds interleaved with torch's own kernel on the same
problem, whose ratio (torch's time / ours) is the "x torch" column.

ladder (4096 x 4096 unless named):
  A. row sums (fp32): a thread per row; a block per row (TVM's cross-thread allreduce); float4 loads;
     several rows per block; and one long vector of 2^26 floats in two stages (rfactor)
  B. softmax fp16: three kernels; one kernel (compute_at: what dlight's GeneralReduction makes);
     the row staged in shared memory; the online softmax (one pass for max and sum), staged and not;
     at 128..1024 threads per row and 4/8-element vectors; dlight itself
  C. layer norm fp16: dlight on the two-pass formulation; Welford in each thread + Chan across threads
  D. softmax and layer norm in fp32, and at 8192 x 8192
sweep: row lengths 128..32768 at 2^24 elements (fp16 and fp32), each strategy (threads per row,
  rows per block, staged or not) against torch.softmax / layer_norm, interleaved.
tune: MetaSchedule (default CUDA space) on the fp16 softmax at 4096 x 4096; the database goes to
  $OUT/tuned-softmax_fp16_4096.tgz.
"""

from __future__ import annotations

import statistics
import sys
import tarfile
import time
from pathlib import Path

import numpy as np

import helpers
from reduction_kernels import (dlight, fused_rows, layer_norm_module, layer_norm_two_pass_module, online_softmax_module,
                               rows_per_block, rowsum_module, softmax_module, thread_per_row, three_kernels, two_stages,
                               vector_sum_module)
from study import Study, cli, error_line, output_dir
from variants import ONLY
from helpers import baselines, bench

BUDGET_S = 420  # a study starts no new variant after this many seconds


# ------------------------------------------------------------------ references and baselines


def ref_softmax(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def ref_layer_norm(x, w, b, eps=1e-5):
    x = x.astype(np.float64)
    m = x.mean(1, keepdims=True)
    return (x - m) / np.sqrt(x.var(1, keepdims=True) + eps) * w.astype(np.float64) + b.astype(np.float64)


def inputs(kind, M, N, dtype):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((M, N)) * 3).astype(dtype)
    if kind == "softmax":
        x[0, ::7] = -np.inf  # masked entries
        x[1] += 1000 if dtype == "float32" else 60  # large logits: exp overflows without the max
        return [x, np.empty_like(x)], lambda: ref_softmax(x)
    if kind == "layer_norm":
        x += 20  # a mean far from 0: one-pass sum of squares loses digits here
        w = rng.standard_normal(N).astype(dtype)
        b = rng.standard_normal(N).astype(dtype)
        return [x, w, b, np.empty_like(x)], lambda: ref_layer_norm(x, w, b)
    return [x, np.empty(M, "float32")], lambda: x.astype(np.float64).sum(1)


def torch_round(kind, args):
    import torch
    import torch.nn.functional as F

    x = torch.from_numpy(np.nan_to_num(args[0], neginf=-1e4)).cuda()
    if kind == "softmax":
        y = torch.empty_like(x)
        call = lambda: torch.softmax(x, dim=-1, out=y)  # noqa: E731
    else:
        w, b = (torch.from_numpy(a).cuda() for a in args[1:3])
        call = lambda: F.layer_norm(x, (x.shape[1],), w, b)  # noqa: E731
    return baselines.event_rounds(call, torch.cuda.Event, torch.cuda.synchronize)


class Table:
    def __init__(self):
        self.t0 = time.time()
        self.dev = helpers.device()
        self.refs = {}
        self.copy = None

    def over_budget(self) -> bool:
        return time.time() - self.t0 > BUDGET_S

    def copy_gbps(self) -> float:
        n = 1 << 26
        a = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
        best = 0.0
        for vector in (1, 4):
            ex = helpers.build(helpers.kernels.copy_kernel(n, 256, vector))
            args = bench._launch_once(ex, self.dev, [a, np.empty_like(a)], -1)
            ms = statistics.median(bench.time_function(ex.mod, self.dev, args, repeat=10))
            best = max(best, 2 * a.nbytes / ms / 1e6)
        self.copy = best
        print(f"copy of 2^26 floats (notebook 00's): {best:,.0f} GB/s", flush=True)
        return best

    def row(self, label, make, kind, args, expected, nbytes, torch_rounds=None, tol=None):
        if self.over_budget():
            print(f"{label:58s} skipped (past the time budget)", flush=True)
            return None
        try:
            sch = make()
            ex = helpers.build(sch)
            dev_args = bench._launch_once(ex, self.dev, args, -1)
            key = (kind, args[0].shape, str(args[0].dtype))
            if key not in self.refs:
                self.refs[key] = expected()
            err = bench.relative_error(dev_args[-1].numpy(), self.refs[key])
            tol = tol or (2e-3 if args[0].dtype == np.float16 else 1e-5)
            if not err <= tol:
                print(f"{label:58s} WRONG: relative error {err:.2e}", flush=True)
                return None
            if torch_rounds is not None:
                bench.time_function(ex.mod, self.dev, dev_args, repeat=1)
                ours, theirs, ratio = baselines.interleaved(
                    lambda: bench.time_function(ex.mod, self.dev, dev_args, repeat=1, warmup=0)[0], torch_rounds, 10)
                ms, tms = statistics.median(ours), statistics.median(theirs)
                extra = f"  torch {tms * 1e3:8.1f} us  x torch {ratio:5.2f}"
            else:
                ms = statistics.median(bench.time_function(ex.mod, self.dev, dev_args, repeat=10))
                extra = ""
            gbps = nbytes / ms / 1e6
            print(f"{label:58s} {ms * 1e3:8.1f} us {gbps:7,.0f} GB/s {gbps / self.copy:6.1%} of copy  "
                  f"err {err:.1e}{extra}", flush=True)
            return ms
        except Exception as err:  # noqa: BLE001 (report it, go on)
            print(f"{label:58s} FAILED {error_line(err)}", flush=True)
            return None


# ------------------------------------------------------------------ the studies


def ladder_variants(M=4096, N=4096):
    """(section, label, make, kind, dtype, shape) of every ladder variant."""
    out = []
    add = lambda *v: out.append(v)  # noqa: E731
    rs = lambda: rowsum_module(M, N)  # noqa: E731
    add("A", "rowsum: thread per row", lambda: thread_per_row(rs()), "rowsum", "float32", (M, N))
    for lanes in (128, 256, 512, 1024):
        add("A", f"rowsum: block per row, {lanes} threads", lambda lanes=lanes: rows_per_block(rs(), lanes), "rowsum", "float32", (M, N))
        add("A", f"rowsum: block per row, {lanes} threads, float4", lambda lanes=lanes: rows_per_block(rs(), lanes, 1, 4),
            "rowsum", "float32", (M, N))
    for lanes, rows in ((32, 8), (64, 4), (128, 2), (256, 2)):
        add("A", f"rowsum: {rows} rows per block, {lanes} threads, float4",
            lambda lanes=lanes, rows=rows: rows_per_block(rs(), lanes, rows, 4), "rowsum", "float32", (M, N))
    for blocks in (264, 528, 1056, 2048):
        add("A", f"vector sum 2^26: two stages, {blocks} blocks", lambda blocks=blocks: two_stages(
            vector_sum_module(1 << 26), blocks if (1 << 26) % (blocks * 1024) == 0 else 1024), "vsum", "float32", (1 << 26,))
    for dtype in ("float16", "float32"):
        for m, n in ((M, N), (8192, 8192)) if dtype == "float16" else ((M, N),):
            sm = lambda m=m, n=n, dtype=dtype: softmax_module(m, n, dtype)  # noqa: E731
            add("B", f"softmax {dtype}: three kernels", lambda sm=sm: three_kernels(sm()), "softmax", dtype, (m, n))
            add("B", f"softmax {dtype}: dlight", lambda sm=sm: dlight(sm()), "softmax", dtype, (m, n))
            vec = 8 if dtype == "float16" else 4
            for lanes in (128, 256, 512, 1024):
                if n // lanes < vec:
                    continue
                add("B", f"softmax {dtype}: one kernel, {lanes} threads", lambda sm=sm, lanes=lanes, vec=vec: fused_rows(
                    sm(), lanes, 1, vec, None), "softmax", dtype, (m, n))
                add("B", f"softmax {dtype}: row in shared, {lanes} threads", lambda sm=sm, lanes=lanes, vec=vec: fused_rows(
                    sm(), lanes, 1, vec), "softmax", dtype, (m, n))
                add("B", f"softmax {dtype}: online, {lanes} threads", lambda m=m, n=n, dtype=dtype, lanes=lanes, vec=vec: fused_rows(
                    online_softmax_module(m, n, lanes, dtype), lanes, 1, vec, None), "softmax", dtype, (m, n))
                add("B", f"softmax {dtype}: online, row in shared, {lanes} threads", lambda m=m, n=n, dtype=dtype, lanes=lanes, vec=vec: fused_rows(
                    online_softmax_module(m, n, lanes, dtype), lanes, 1, vec), "softmax", dtype, (m, n))
            if dtype == "float16":
                add("B", f"softmax {dtype}: row in shared, 512 threads, vector 4", lambda sm=sm: fused_rows(sm(), 512, 1, 4),
                    "softmax", dtype, (m, n))
            add("C", f"layer norm {dtype}: dlight (two-pass)", lambda m=m, n=n, dtype=dtype: dlight(layer_norm_two_pass_module(m, n, dtype)),
                "layer_norm", dtype, (m, n))
            for lanes in (256, 512, 1024):
                if n // lanes < vec:
                    continue
                add("C", f"layer norm {dtype}: Welford, {lanes} threads", lambda m=m, n=n, dtype=dtype, lanes=lanes, vec=vec: fused_rows(
                    layer_norm_module(m, n, lanes, dtype), lanes, 1, vec, None), "layer_norm", dtype, (m, n))
                add("C", f"layer norm {dtype}: Welford, row in shared, {lanes} threads", lambda m=m, n=n, dtype=dtype, lanes=lanes, vec=vec: fused_rows(
                    layer_norm_module(m, n, lanes, dtype), lanes, 1, vec), "layer_norm", dtype, (m, n))
    return out


def traffic(kind, shape, dtype):
    size = np.dtype(dtype).itemsize
    if kind == "vsum":
        return shape[0] * 4
    M, N = shape
    if kind == "rowsum":
        return M * N * size + M * 4
    extra = 2 * N * size if kind == "layer_norm" else 0
    return 2 * M * N * size + extra


def run_variants(variants, args) -> int:
    table = Table()
    table.copy_gbps()
    torch_rounds = {}
    section = None
    for sec, label, make, kind, dtype, shape in variants:
        if args.only and args.only not in label:
            continue
        if sec != section:
            print(f"\n{sec}.", flush=True)
            section = sec
        if kind == "vsum":
            x = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)
            a, expected = [x, np.empty(1, "float32")], (lambda x=x: np.array([x.astype(np.float64).sum()]))
            tol = 1e-5
        else:
            a, expected = inputs(kind, *shape, dtype)
            tol = None
        tr = None
        if kind in ("softmax", "layer_norm"):
            key = (kind, shape, dtype)
            if key not in torch_rounds:
                torch_rounds[key] = torch_round(kind, a)
            tr = torch_rounds[key]
        table.row(f"{label} {'x'.join(map(str, shape))}", make, kind, a, expected, traffic(kind, shape, dtype), tr, tol)
    print(f"\n{time.time() - table.t0:.0f} s")
    return 0


def dry(variants, args) -> int:
    failed = 0
    for sec, label, make, *_ in variants:
        if args.only and args.only not in label:
            continue
        t = time.time()
        try:
            sch = make()
            helpers.build(sch, helpers.listing_target())
            report = helpers.ptxas_report(sch) if helpers.nvcc_path() else []  # NVRTC's errors show up here
            note = f"built in {time.time() - t:.1f} s" + "".join(
                f"; {r.registers} registers, {r.spill_stores} spill stores" for r in report)
        except Exception as err:  # noqa: BLE001
            failed += 1
            note = f"FAILED {error_line(err)}"
        print(f"{sec} {label:60s} {note}", flush=True)
    print(f"dry run: {failed} failed")
    return 1 if failed else 0


def ladder(args) -> int:
    variants = ladder_variants()
    return dry(variants, args) if args.dry else run_variants(variants, args)


def sweep_variants():
    """For each row length: 1, 2, 4 or 8 vectors per thread, blocks of 128 or 256 threads (several
    rows per block where a row needs fewer threads), the row staged in shared memory where it fits."""
    out = []
    for dtype in ("float16", "float32"):
        vec = 8 if dtype == "float16" else 4
        for n in (128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768):
            m = (1 << 24) // n
            for per_thread in (1, 2, 4, 8):
                lanes = n // (vec * per_thread)
                if not 8 <= lanes <= 1024:
                    continue
                for block in sorted({max(lanes, 128), max(lanes, 256)}):
                    rows = block // lanes
                    stage = "shared.dyn" if rows * n * np.dtype(dtype).itemsize <= 96 * 1024 else None
                    name = f"softmax {dtype} {lanes} threads x {rows} rows{', shared' if stage else ''}"
                    out.append(("S", name, lambda m=m, n=n, dtype=dtype, lanes=lanes, rows=rows, vec=vec, stage=stage:
                                fused_rows(softmax_module(m, n, dtype), lanes, rows, vec, stage), "softmax", dtype, (m, n)))
                    if dtype == "float16":
                        out.append(("L", f"layer norm {dtype} {lanes} threads x {rows} rows{', shared' if stage else ''}",
                                    lambda m=m, n=n, dtype=dtype, lanes=lanes, rows=rows, vec=vec, stage=stage:
                                    fused_rows(layer_norm_module(m, n, lanes, dtype), lanes, rows, vec, stage),
                                    "layer_norm", dtype, (m, n)))
    return out


def sweep(args) -> int:
    variants = sweep_variants()
    return dry(variants, args) if args.dry else run_variants(variants, args)


def tune(args) -> int:
    from helpers import tuning

    work = Path("/tmp/tune/softmax_fp16_4096")
    mod = softmax_module(4096, 4096, "float16")
    run = tuning.tune(mod["main"], work, trials=args.trials, minutes=args.minutes)
    print(run)
    out = output_dir(Path("."))
    with tarfile.open(out / "tuned-softmax_fp16_4096.tgz", "w:gz") as tar:
        tar.add(work, arcname=work.name)
    best = run.best
    if best is not None:
        table = Table()
        table.copy_gbps()
        a, expected = inputs("softmax", 4096, 4096, "float16")
        table.row("softmax float16: MetaSchedule best", lambda: best.sch, "softmax", a, expected,
                  traffic("softmax", (4096, 4096), "float16"), torch_round("softmax", a))
    return 0


def copy_sizes(args) -> int:
    """Notebook 00's float4 copy at 2^22..2^26 floats: what a copy of a kernel's own bytes reaches."""
    dev = helpers.device()
    for e in (22, 23, 24, 25, 26):
        n = 1 << e
        a = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
        ex = helpers.build(helpers.kernels.copy_kernel(n, 256, 4))
        dev_args = bench._launch_once(ex, dev, [a, np.empty_like(a)], -1)
        ms = statistics.median(bench.time_function(ex.mod, dev, dev_args, repeat=20))
        print(f"copy 2^{e} floats float4: {ms * 1e3:8.1f} us {2 * a.nbytes / ms / 1e6:7,.0f} GB/s")
    return 0


STUDIES = {
    "copy-sizes": Study(copy_sizes, "notebook 00's float4 copy at 2^22..2^26 floats", dry=False, needs=()),
    "ladder": Study(ladder, "the ladder's variants at 4096 x 4096 (and the vector sum, and 8192^2)", arguments=(ONLY,)),
    "sweep": Study(sweep, "row lengths 128..32768 at 2^24 elements", arguments=(ONLY,)),
    "tune": Study(tune, "MetaSchedule on the fp16 softmax", dry=False, arguments=(
        (("--trials",), dict(type=int, default=128)), (("--minutes",), dict(type=float, default=4.0)))),
}

if __name__ == "__main__":
    sys.exit(cli(__file__, __doc__, STUDIES))
