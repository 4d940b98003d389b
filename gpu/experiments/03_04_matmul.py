"""Explore fp32 matmul schedules for notebooks 03 (local blocking) and 04 (shared blocking).

    PYTHONPATH=. python gpu/experiments/03_04_matmul.py          # on the H100: build, check, time
    PYTHONPATH=. python gpu/experiments/03_04_matmul.py --dry    # anywhere: only build every variant

Each variant is built, run once on NaN-poisoned output, checked against torch's fp32 matmul
(TF32 off) on the GPU, then timed with few repeats. One table at the end (plus cuBLAS and the
ptxas report of the best ones). A time guard skips the remaining variants near 4 minutes.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import traceback

import numpy as np
import tvm
from tvm import s_tir
from tvm.script import tirx as T

import helpers

T0 = time.time()
BUDGET_S = 215.0


def matmul_module(M, N, K, dtype="float32"):
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((M, K), dtype), B: T.Buffer((K, N), dtype), C: T.Buffer((M, N), dtype)):
        T.func_attr({"tirx.noalias": True})
        for i, j, k in T.grid(M, N, K):
            with T.sblock("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]

    return tvm.IRModule({"main": main})


# ------------------------------------------------------------------ the ladder (03)


def naive(M, N, K):
    sch = s_tir.Schedule(matmul_module(M, N, K))
    i, j, k = sch.get_loops(sch.get_sblock("C"))
    sch.bind(i, "blockIdx.y")
    sch.bind(j, "blockIdx.x")
    return sch


def naive_256(M, N, K):
    """One thread per output, 256 threads per block along j (coalesced B, broadcast A)."""
    sch = s_tir.Schedule(matmul_module(M, N, K))
    i, j, k = sch.get_loops(sch.get_sblock("C"))
    j0, j1 = sch.split(j, [None, 256])
    sch.bind(i, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    sch.bind(j1, "threadIdx.x")
    return sch


def threads_1d(M, N, K, tx=32):
    sch = s_tir.Schedule(matmul_module(M, N, K))
    i, j, k = sch.get_loops(sch.get_sblock("C"))
    j0, j1 = sch.split(j, [None, tx])
    sch.reorder(i, j0, j1)
    sch.bind(i, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    sch.bind(j1, "threadIdx.x")
    return sch


def threads_2d(M, N, K, ty=32, tx=32, strided=False):
    """2D thread blocks. strided=True binds threadIdx.x to i (a warp reads a column of A: strided)."""
    sch = s_tir.Schedule(matmul_module(M, N, K))
    i, j, k = sch.get_loops(sch.get_sblock("C"))
    i0, i1 = sch.split(i, [None, ty])
    j0, j1 = sch.split(j, [None, tx])
    sch.reorder(i0, j0, i1, j1)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    sch.bind(i1, "threadIdx.x" if strided else "threadIdx.y")
    sch.bind(j1, "threadIdx.y" if strided else "threadIdx.x")
    return sch


def pad_to_tiles(sch, blk, factors):
    """Pad the loops to multiples of the tiles (zeros in, the padding cut off on the way out)."""
    sch.pad_einsum(blk, factors)


def inline_padding(sch):
    for b in ("A_pad", "B_pad"):
        try:
            sch.compute_inline(sch.get_sblock(b))
        except Exception:
            pass  # that operand needed no padding
    try:
        sch.reverse_compute_inline(sch.get_sblock("C_pad"))
    except Exception:
        pass


def local_blocking(M, N, K, tiles, wj=None, local_ab=False, unroll=True, pad=False):
    """tiles = (ly, lx, by, bx, tk): each thread ly x lx outputs, by x bx threads, k step tk.

    wj: if smaller than lx, a thread's lx columns are lx/wj groups of wj, interleaved with the
    other threads' (vthread.x), so that a warp's reads of B are contiguous.
    local_ab: stage A (ly x tk) and B (tk x lx) in registers with vector loads each k step.
    """
    ly, lx, by, bx, tk = tiles
    wj = wj or lx
    sch = s_tir.Schedule(matmul_module(M, N, K))
    blk = sch.get_sblock("C")
    if pad:
        pad_to_tiles(sch, blk, [by * ly, bx * lx, tk])
    c_local = sch.cache_write(blk, 0, "local")
    i, j, k = sch.get_loops(blk)
    i0, i1, i2 = sch.split(i, [None, by, ly])
    j0, jv, j1, jw = sch.split(j, [None, lx // wj, bx, wj])
    k0, k1 = sch.split(k, [None, tk])
    sch.reorder(i0, j0, jv, i1, j1, k0, k1, i2, jw)
    sch.reverse_compute_at(c_local, j1)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    sch.bind(jv, "vthread.x")
    sch.bind(i1, "threadIdx.y")
    sch.bind(j1, "threadIdx.x")
    if local_ab:
        for idx in (0, 1):
            r = sch.cache_read(blk, idx, "local")
            sch.compute_at(r, k0)
            inner = sch.get_loops(r)[-1]
            ext = tk if idx == 0 else wj
            if ext % 4 == 0:
                _, v = sch.split(inner, [None, 4])
                sch.vectorize(v)
            elif ext % 2 == 0:
                _, v = sch.split(inner, [None, 2])
                sch.vectorize(v)
    if unroll:
        sch.unroll(k1)
        sch.unroll(i2)
        sch.unroll(jw)
    if pad:
        inline_padding(sch)
    sch.decompose_reduction(blk, k0)
    return sch


# ------------------------------------------------------------------ shared memory (04)


def shared_blocking(M, N, K, tiles, vec=4, pad=0, wj=None, wi=None, local_ab=False, stages=0,
                    async_copy=False, a_transposed=False, fuse_threads=False, pipeline_order=None,
                    fetch_strided=False, pad_shape=False):
    """tiles = (ly, lx, by, bx, tk). Block tile (by*ly) x (bx*lx), k tile tk, staged in shared
    memory by a cooperative, `vec`-wide vectorized fetch; accumulators in registers.

    pad: storage_align offset (floats) for both shared tiles' rows (0 = no padding).
    wj / wi: interleave a thread's columns / rows in groups of wj / wi (vthreads).
    local_ab: copy the A column and B row a thread needs per k into registers (vectorized).
    stages: 2 = software pipelining (double buffer) of the shared fetch over the k loop.
    a_transposed: store the A tile as [k][i] in shared memory.
    """
    ly, lx, by, bx, tk = tiles
    wj = wj or lx
    wi = wi or ly
    sch = s_tir.Schedule(matmul_module(M, N, K))
    blk = sch.get_sblock("C")
    if pad_shape:
        pad_to_tiles(sch, blk, [by * ly, bx * lx, tk])
    c_local = sch.cache_write(blk, 0, "local")
    i, j, k = sch.get_loops(blk)
    i0, iv, i1, iw = sch.split(i, [None, ly // wi, by, wi])
    j0, jv, j1, jw = sch.split(j, [None, lx // wj, bx, wj])
    k0, k1 = sch.split(k, [None, tk])
    sch.reorder(i0, j0, iv, jv, i1, j1, k0, k1, iw, jw)
    sch.reverse_compute_at(c_local, j1)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    sch.bind(iv, "vthread.y")
    sch.bind(jv, "vthread.x")
    if fuse_threads:
        sch.bind(sch.fuse(i1, j1), "threadIdx.x")
    else:
        sch.bind(i1, "threadIdx.y")
        sch.bind(j1, "threadIdx.x")
    fetches = []
    for idx in (0, 1):
        s = sch.cache_read(blk, idx, "shared")
        sch.compute_at(s, k0)
        if idx == 0 and a_transposed:
            sch.transform_layout(s, ("write", 0), lambda a, b: (b, a))
        fused = sch.fuse(*sch.get_loops(s)[-2:])
        if fuse_threads:
            _, tx, v = sch.split(fused, [None, by * bx, vec])
            sch.bind(tx, "threadIdx.x")
        elif fetch_strided:  # each thread fetches a contiguous run: a warp's reads are strided
            ty, tx, _, v = sch.split(fused, [by, bx, None, vec])
            sch.bind(ty, "threadIdx.y")
            sch.bind(tx, "threadIdx.x")
        else:
            _, ty, tx, v = sch.split(fused, [None, by, bx, vec])
            sch.bind(ty, "threadIdx.y")
            sch.bind(tx, "threadIdx.x")
        sch.vectorize(v)
        if pad:  # row stride = row length + pad (mod 32 banks)
            row = tk if (idx == 0 and not a_transposed) else (by * ly if idx == 0 else bx * lx)
            sch.storage_align(s, 0, axis=0, factor=min(row, 32), offset=pad)
        fetches.append(s)
    if local_ab:
        for idx in (0, 1):
            r = sch.cache_read(blk, idx, "local")
            sch.compute_at(r, k1)
            inner = sch.get_loops(r)[-1]
            ext = wi if idx == 0 else wj
            if ext % 4 == 0:
                _, v = sch.split(inner, [None, 4])
                sch.vectorize(v)
    sch.unroll(k1)
    sch.unroll(iw)
    sch.unroll(jw)
    if pad_shape:
        inline_padding(sch)
    sch.decompose_reduction(blk, k0)
    if stages:
        # children of k0: A fetch, B fetch, k1 compute nest
        sch.annotate(k0, "software_pipeline_stage", [0, 0, stages - 1])
        sch.annotate(k0, "software_pipeline_order", pipeline_order or [0, 1, 2])
        if async_copy:
            sch.annotate(k0, "software_pipeline_async_stages", [0])
    return sch


def dlight_default(M, N, K):
    from tvm.s_tir import dlight as dl

    mod = matmul_module(M, N, K)
    target = helpers.make_target()
    with target:
        mod = dl.ApplyDefaultSchedule(dl.gpu.Matmul())(mod)
    return mod


# ------------------------------------------------------------------ the variants


def variants():
    """(name, shape, builder, flags). Ordered by priority: the time guard cuts from the end."""
    S = (4096, 4096, 4096)
    R = (1024, 512, 2048)
    V = []
    add = lambda name, shape, fn, **kw: V.append((name, shape, fn, kw))  # noqa: E731

    # shapes the tiles do not divide, padded (pad_einsum)
    P = (1000, 1000, 1000)
    add("lb (8, 8, 16, 16, 8) wj4 lab padded", P,
        lambda M, N, K: local_blocking(M, N, K, (8, 8, 16, 16, 8), wj=4, local_ab=True, pad=True))
    add("sh (8, 8, 16, 16, 8) At lab pad4 padded", P,
        lambda M, N, K: shared_blocking(M, N, K, (8, 8, 16, 16, 8), 4, pad=4, wj=4, wi=4, local_ab=True,
                                        a_transposed=True, pad_shape=True))
    add("sh (8, 8, 16, 16, 8) lab pad4 padded", P,
        lambda M, N, K: shared_blocking(M, N, K, (8, 8, 16, 16, 8), 4, pad=4, wj=4, wi=4, local_ab=True, pad_shape=True))
    add("sh (8, 8, 16, 16, 8) lab pad4 padded 1000x1000x1001", (1000, 1000, 1001),
        lambda M, N, K: shared_blocking(M, N, K, (8, 8, 16, 16, 8), 4, pad=4, wj=4, wi=4, local_ab=True, pad_shape=True))

    # the ladder's first steps at the seed's shape (fast)
    add("1d threads tx32", R, threads_1d)
    add("2d threads 32x32", R, threads_2d)
    add("2d threads 32x32 strided", R, lambda M, N, K: threads_2d(M, N, K, strided=True))
    add("2d threads 16x16", R, lambda M, N, K: threads_2d(M, N, K, 16, 16))
    add("naive 1 thread/block", R, naive)
    add("naive 256/block", R, naive_256)

    # 04: shared-memory blocking, the most important goal
    add("sh seed (8,8,8,8,8) v4", S, lambda M, N, K: shared_blocking(M, N, K, (8, 8, 8, 8, 8), 4, fuse_threads=True))
    add("sh (4,4,16,16,16) v4", S, lambda M, N, K: shared_blocking(M, N, K, (4, 4, 16, 16, 16), 4, fuse_threads=True))
    combos = [("At lab pad4", dict(a_transposed=True, local_ab=True, pad=4)),
              ("At lab pad0", dict(a_transposed=True, local_ab=True, pad=0)),
              ("lab pad4", dict(local_ab=True, pad=4)),
              ("contig pad0", dict(contig=True))]
    for tiles in [(8, 8, 16, 16, 8), (8, 8, 16, 16, 16), (8, 8, 8, 16, 8), (8, 8, 16, 8, 8), (8, 8, 8, 16, 16),
                  (8, 4, 16, 16, 8), (4, 8, 16, 16, 8), (8, 4, 16, 16, 16), (4, 4, 16, 16, 8), (4, 4, 32, 16, 8),
                  (8, 8, 8, 8, 16), (8, 8, 8, 8, 8), (4, 8, 16, 16, 16), (8, 8, 16, 16, 32)]:
        for label, kw in combos:
            if kw.get("contig"):
                fn = lambda M, N, K, t=tiles: shared_blocking(M, N, K, t, 4)
            else:
                fn = lambda M, N, K, t=tiles, kw=kw: shared_blocking(M, N, K, t, 4, wj=4, wi=4, **kw)
            add(f"sh {tiles} {label}", S, fn)
    # vector width of the cooperative fetch
    for vec in (1, 2):
        add(f"sh (8, 8, 16, 16, 8) At lab pad4 v{vec}", S,
            lambda M, N, K, v=vec: shared_blocking(M, N, K, (8, 8, 16, 16, 8), v, pad=4, wj=4, wi=4, local_ab=True, a_transposed=True))
    # software pipelining (double buffering of the shared tiles)
    for tiles in [(8, 8, 16, 16, 8), (8, 8, 16, 16, 16), (8, 8, 8, 16, 8), (8, 8, 8, 16, 16)]:
        for asy in (False, True):
            add(f"sh {tiles} At lab pad4 pipe2{' async' if asy else ''}", S,
                lambda M, N, K, t=tiles, a=asy: shared_blocking(M, N, K, t, 4, pad=4, wj=4, wi=4, local_ab=True,
                                                                a_transposed=True, stages=2, async_copy=a))
    for tiles in [(8, 8, 16, 16, 8), (8, 8, 16, 16, 16), (8, 8, 8, 16, 16)]:
        add(f"sh {tiles} lab pad4 pipe2 async", S,
            lambda M, N, K, t=tiles: shared_blocking(M, N, K, t, 4, pad=4, wj=4, wi=4, local_ab=True, stages=2, async_copy=True))
        add(f"sh {tiles} lab pad4 pipe3 async", S,
            lambda M, N, K, t=tiles: shared_blocking(M, N, K, t, 4, pad=4, wj=4, wi=4, local_ab=True, stages=3, async_copy=True))
        add(f"sh {tiles} At lab pad4 pipe3 async", S,
            lambda M, N, K, t=tiles: shared_blocking(M, N, K, t, 4, pad=4, wj=4, wi=4, local_ab=True, a_transposed=True,
                                                     stages=3, async_copy=True))
    # coalescing of the cooperative fetch: strided versus contiguous warp reads
    for tiles in [(8, 8, 16, 16, 16), (8, 8, 16, 16, 32)]:
        for vec in (1, 4):
            add(f"sh {tiles} At lab pad4 v{vec} fetch-strided", S,
                lambda M, N, K, t=tiles, v=vec: shared_blocking(M, N, K, t, v, pad=4, wj=4, wi=4, local_ab=True,
                                                                a_transposed=True, fetch_strided=True))
        add(f"sh {tiles} At lab pad4 v1", S,
            lambda M, N, K, t=tiles: shared_blocking(M, N, K, t, 1, pad=4, wj=4, wi=4, local_ab=True, a_transposed=True))
    for tiles in [(8, 8, 16, 16, 8), (8, 8, 16, 16, 16), (8, 8, 8, 16, 8)]:
        add(f"sh {tiles} lab pad0", S, lambda M, N, K, t=tiles: shared_blocking(M, N, K, t, 4, wj=4, wi=4, local_ab=True))
    # thread tile interleaved but no register staging; bank-conflict demos with 2 / 4-way
    add("sh (8, 8, 16, 16, 8) wj4 pad0 (no lab)", S, lambda M, N, K: shared_blocking(M, N, K, (8, 8, 16, 16, 8), 4, wj=4, wi=4))
    add("sh (8, 8, 16, 16, 8) contig pad4", S, lambda M, N, K: shared_blocking(M, N, K, (8, 8, 16, 16, 8), 4, pad=4))
    add("sh (8, 8, 16, 16, 8) contig lab pad0", S, lambda M, N, K: shared_blocking(M, N, K, (8, 8, 16, 16, 8), 4, local_ab=True))

    # 03: local blocking (no shared memory)
    add("lb seed (8,8,8,8,4)", S, lambda M, N, K: local_blocking(M, N, K, (8, 8, 8, 8, 4), unroll=False))
    add("lb (8,8,8,8,4) unrolled", S, lambda M, N, K: local_blocking(M, N, K, (8, 8, 8, 8, 4)))
    for ly, lx in [(4, 4), (8, 4), (4, 8), (8, 8)]:
        for by, bx in [(8, 8), (16, 16), (16, 8), (8, 16)]:
            for tk in (4, 8, 16):
                for wj, la in [(4, True)] + ([(lx, True)] if lx != 4 else []):
                    if (wj, la) == (lx, True) and not (tk == 8 and (by, bx) in [(16, 16), (8, 16)]):
                        continue  # the contiguous layout only on a subset
                    name = f"lb {(ly, lx, by, bx, tk)} wj{wj}{' lab' if la else ''}"
                    add(name, S, lambda M, N, K, t=(ly, lx, by, bx, tk), w=wj, l=la: local_blocking(M, N, K, t, wj=w, local_ab=l))
    for ly, lx, by, bx, tk in [(8, 8, 16, 16, 8), (8, 8, 8, 16, 8), (4, 8, 16, 16, 8)]:
        add(f"lb {(ly, lx, by, bx, tk)} wj4 (no lab)", S,
            lambda M, N, K, t=(ly, lx, by, bx, tk): local_blocking(M, N, K, t, wj=4))

    # the ladder
    add("1d threads tx32", S, threads_1d)
    add("2d threads 32x32", S, threads_2d)
    add("2d threads 32x32 strided", S, lambda M, N, K: threads_2d(M, N, K, strided=True))
    add("2d threads 16x16", S, lambda M, N, K: threads_2d(M, N, K, 16, 16))
    add("dlight default", S, dlight_default)
    add("naive 1 thread/block", S, naive)

    # most promising first: the time guard cuts from the end
    main4 = ("(8, 8, 16, 16, 8)", "(8, 8, 16, 16, 16)", "(8, 8, 8, 16, 8)", "(8, 8, 8, 16, 16)")

    def priority(v):
        name, shape = v[0], v[1]
        if shape not in (R, S) or shape == R or "seed" in name or name.startswith("sh (4,4,16,16,16)"):
            return 0
        if name.startswith("sh ") and any(t in name for t in main4):
            return 1
        if name.startswith("lb ") and ("(8, 8, 16, 16, 8)" in name or "(8, 8, 8, 16, 8)" in name or "unrolled" in name):
            return 2
        if name.startswith("sh "):
            return 3
        if name.startswith("lb "):
            return 4
        return 5

    return sorted(V, key=priority)


# ------------------------------------------------------------------ running


class Inputs:
    def __init__(self, M, N, K, dev):
        rng = np.random.default_rng(0)
        self.a = rng.uniform(-1, 1, (M, K)).astype("float32")
        self.b = rng.uniform(-1, 1, (K, N)).astype("float32")
        self.args = [tvm.runtime.tensor(self.a, dev), tvm.runtime.tensor(self.b, dev),
                     tvm.runtime.tensor(np.zeros((M, N), "float32"), dev)]
        self.nan = np.full((M, N), np.nan, "float32")
        import torch

        torch.backends.cuda.matmul.allow_tf32 = False
        self.ref = (torch.from_numpy(self.a).cuda() @ torch.from_numpy(self.b).cuda()).double()
        self.ref_norm = float(self.ref.norm())

    def error(self):
        """Relative error of C against torch's fp32 matmul (TF32 off), computed on the GPU."""
        import torch

        try:
            out = torch.from_dlpack(self.args[2]).double()
        except Exception:
            out = torch.from_numpy(self.args[2].numpy()).cuda().double()
        return float((out - self.ref).norm()) / self.ref_norm


def time_ms(mod, dev, args, expect_ms):
    repeat = 2 if expect_ms > 100 else 5
    times = helpers.time_function(mod, dev, args, repeat=repeat, warmup=1, min_repeat_ms=0 if expect_ms > 20 else 15)
    return statistics.median(times)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--dry", action="store_true", help="only build every variant (no GPU needed)")
    ap.add_argument("--only", default="", help="substring filter on variant names")
    ap.add_argument("--trace", action="store_true", help="print tracebacks of failing variants")
    args = ap.parse_args(argv)
    dry = args.dry or not helpers.gpu_available()
    target = helpers.make_target() if not dry else helpers.listing_target()
    print(f"TVM {tvm.__version__}, target {target}, {'DRY (build only)' if dry else 'live'}", flush=True)
    dev = None if dry else helpers.device()
    inputs = {}
    rows = []
    built = {}
    cublas = {}
    if not dry:
        for shape in [(4096, 4096, 4096), (1024, 512, 2048)]:
            cublas[shape] = helpers.cublas_time(*shape, "float32", repeat=10)
            print(f"cuBLAS fp32 {shape}: {cublas[shape]:.4f} ms = {2 * np.prod(shape) / cublas[shape] / 1e9:.2f} TFLOP/s", flush=True)
    def run_one(name, shape, fn):
        if time.time() - T0 > BUDGET_S:
            rows.append((name, shape, None, None, "skipped (time budget)"))
            return
        M, N, K = shape
        t = time.time()
        try:
            sch = fn(M, N, K)
            # cp.async (global -> shared without registers) needs this pass option
            with tvm.transform.PassContext(config={"tirx.use_async_copy": "async" in name}):
                ex = helpers.build(sch, target)
            built[(name, shape)] = sch
            builders[name] = fn
            if dry:
                rows.append((name, shape, None, None, f"built in {time.time() - t:.1f}s"))
                return
            if shape not in inputs:
                inputs.clear()
                inputs[shape] = Inputs(M, N, K, dev)
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
                return
            ms = time_ms(ex.mod, dev, inp.args, first_ms)
            rows.append((name, shape, ms, err, ""))
            print(f"{name} {shape}: {ms:.4f} ms  {2 * M * N * K / ms / 1e9:.2f} TFLOP/s  err {err:.1e}  "
                  f"({time.time() - t:.1f}s)", flush=True)
        except Exception as e:  # report, never crash
            msg = f"{type(e).__name__}: {str(e).strip().splitlines()[-1][:150] if str(e).strip() else ''}"
            rows.append((name, shape, None, None, "FAILED " + msg))
            print(f"{name} {shape}: FAILED {msg}", flush=True)
            if args.trace:
                traceback.print_exc()

    builders = {}
    for name, shape, fn, kw in variants():
        if args.only and args.only not in name:
            continue
        run_one(name, shape, fn)
    # the best three of each family also at the rectangular shape
    ok = [r for r in rows if r[2] is not None and r[1] == (4096, 4096, 4096)]
    for prefix in ("sh ", "lb "):
        fam = sorted([r for r in ok if r[0].startswith(prefix)], key=lambda r: r[2])[:3]
        for r in fam:
            run_one(r[0], (1024, 512, 2048), builders[r[0]])

    # ptxas reports of the best few of each family
    ok = [r for r in rows if r[2] is not None]
    if helpers.nvcc_path() and ok:
        print("\nptxas (sm_90) of the best variants:")
        for prefix in ("sh ", "lb "):
            best = sorted([r for r in ok if r[0].startswith(prefix)], key=lambda r: r[2])[:4]
            for r in best:
                try:
                    with tvm.transform.PassContext(config={"tirx.use_async_copy": "async" in r[0]}):
                        reps = helpers.ptxas_report(built[(r[0], r[1])], helpers.listing_target())
                    for rep in reps:
                        print(f"  {r[0]}: {rep.registers} regs, {rep.shared_bytes} B smem, "
                              f"spill {rep.spill_stores}/{rep.spill_loads} B")
                except Exception as e:
                    print(f"  {r[0]}: ptxas failed: {e}")
    elif dry and helpers.nvcc_path():
        for name in ("sh (8, 8, 16, 16, 8) At lab pad4", "lb (8, 8, 16, 16, 8) wj4 lab"):
            for key, sch in built.items():
                if key[0] == name:
                    for rep in helpers.ptxas_report(sch, helpers.listing_target()):
                        print(f"  {name}: {rep}")

    print("\n==== results (fp32; % of cuBLAS fp32 TF32 off, same run) ====")
    for shape, ms in cublas.items():
        print(f"cuBLAS {shape}: {ms:.4f} ms, {2 * np.prod(shape) / ms / 1e9:.2f} TFLOP/s")
    print(f"{'variant':56s} {'shape':18s} {'ms':>9s} {'TFLOP/s':>8s} {'rel err':>8s} {'%cuBLAS':>7s}  note")
    for name, shape, ms, err, note in rows:
        M, N, K = shape
        tf = f"{2 * M * N * K / ms / 1e9:8.2f}" if ms else f"{'-':>8s}"
        pct = f"{100 * cublas[shape] / ms:6.1f}%" if ms and shape in cublas and cublas[shape] else f"{'-':>7s}"
        print(f"{name:56s} {'x'.join(map(str, shape)):18s} {ms if ms else float('nan'):9.4f} {tf} "
              f"{err if err is not None else float('nan'):8.1e} {pct}  {note}")
    print(f"{sum(1 for r in rows if r[4].startswith('skipped'))} variants skipped for time; total {time.time() - T0:.0f} s")


if __name__ == "__main__":
    main()
