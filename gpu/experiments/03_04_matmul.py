"""fp32 matmul schedules for notebooks 03 (local blocking) and 04 (shared blocking), explored broadly.

    python gpu/experiments/03_04_matmul.py sweep                       # on a GPU: build, check, time
    python gpu/experiments/03_04_matmul.py sweep --dry                 # anywhere: only build every variant
    python gpu/experiments/03_04_matmul.py notebook-schedules [--dry]  # the notebooks' own schedule functions

sweep: this file's schedule functions over thread tiles, block tiles, k tiles, register staging,
shared-memory layouts (A stored [k][i], padded rows), fetch widths, coalescing, software
pipelines (with and without cp.async) and shapes the tiles do not divide; the three best of each
family also at 1024 x 512 x 2048, and ptxas's report of the best.
notebook-schedules: the schedule functions of notebooks 03 and 04, read from the notebooks
themselves, on the variants the notebooks measure: a check of the notebooks' code on a GPU
without running the notebooks.

Each variant is built, run once on a NaN-poisoned output, checked against torch's fp32 matmul
(TF32 off) on the GPU, then timed, beside cuBLAS fp32 in the same run. One table at the end.
A time guard skips the remaining variants past ~3.5 minutes.
"""

from __future__ import annotations

import functools
import sys
import time

import numpy as np
import tvm
from tvm import s_tir

import helpers
from helpers import baselines
from lesson_code import notebook_functions
from ncu import NCU_MENTIONED, launch_checked, ncu_first, ncu_rows, profile_side_by_side
from study import Study, cli, one_of
from variants import (MatmulCheck, ONLY, Variant, beside_cublas, dry_run, matmul_table, measure_matmuls, only,
                      print_ptxas)

SQUARE, RECT, PADDED = (4096, 4096, 4096), (1024, 512, 2048), (1000, 1000, 1000)


# ------------------------------------------------------------------ the schedules


def matmul_module(M, N, K) -> tvm.IRModule:
    """C = A @ B in float32, A of M x K, B of K x N; its kernel is named main_kernel, as in the
    recorded results."""
    return tvm.IRModule({"main": helpers.matmul_workload(M, N, K).with_attr("global_symbol", "main")})


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


def accumulate_in_registers(M, N, K, tiles, pad: bool):
    """A schedule of the matmul whose block `C` accumulates into registers (`C_local`); with `pad`,
    its loops first padded to multiples of the block tile (zeros in, the padding cut off on the way
    out), for shapes the tiles do not divide. Returns the schedule, the block and its C_local."""
    ly, lx, by, bx, tk = tiles
    sch = s_tir.Schedule(matmul_module(M, N, K))
    blk = sch.get_sblock("C")
    if pad:
        sch.pad_einsum(blk, [by * ly, bx * lx, tk])
    return sch, blk, sch.cache_write(blk, 0, "local")


def registers(sch, blk, loop, extents, loops=None):
    """Copy the A and B values a thread needs per iteration of `loop` (or of `loops`, one per
    operand) into registers, with the widest vector load (4 or 2 floats) that divides their
    innermost extents `extents`."""
    for idx, ext, at in zip((0, 1), extents, loops or (loop, loop)):
        r = sch.cache_read(blk, idx, "local")
        sch.compute_at(r, at)
        width = next((w for w in (4, 2) if ext % w == 0), None)
        if width:
            _, v = sch.split(sch.get_loops(r)[-1], [None, width])
            sch.vectorize(v)


def finish(sch, blk, k0, unrolled, padded: bool):
    """Unroll the loops inside a k step (register indices become constants), fold the padding of a
    padded schedule into its loads and stores, and zero the accumulators once, before the k loop."""
    for loop in unrolled:
        sch.unroll(loop)
    if padded:
        inline_padding(sch)
    sch.decompose_reduction(blk, k0)


def local_blocking(M, N, K, tiles, wj=None, local_ab=False, unroll=True, pad=False):
    """tiles = (ly, lx, by, bx, tk): each thread ly x lx outputs, by x bx threads, k step tk.

    wj: if smaller than lx, a thread's lx columns are lx/wj groups of wj, interleaved with the
    other threads' (vthread.x), so that a warp's reads of B are contiguous.
    local_ab: stage A (ly x tk) and B (tk x lx) in registers with vector loads each k step.
    """
    ly, lx, by, bx, tk = tiles
    wj = wj or lx
    sch, blk, c_local = accumulate_in_registers(M, N, K, tiles, pad)
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
        registers(sch, blk, k0, (tk, wj))
    finish(sch, blk, k0, (k1, i2, jw) if unroll else (), pad)
    return sch


# ------------------------------------------------------------------ shared memory (04)


def shared_blocking(M, N, K, tiles, vec=4, pad=0, wj=None, wi=None, local_ab=False, stages=0,
                    async_copy=False, a_transposed=False, fuse_threads=False, pipeline_order=None,
                    fetch_strided=False, pad_shape=False, a_ahead=0, through_registers=False,
                    fragments_ahead=False, a_lanes_down=False):
    """tiles = (ly, lx, by, bx, tk). Block tile (by*ly) x (bx*lx), k tile tk, staged in shared
    memory by a cooperative, `vec`-wide vectorized fetch; accumulators in registers.

    pad: storage_align offset (floats) for both shared tiles' rows (0 = no padding).
    wj / wi: interleave a thread's columns / rows in groups of wj / wi (vthreads).
    local_ab: copy the A column and B row a thread needs per k into registers (vectorized).
    stages: 2 = software pipelining (double buffer) of the shared fetch over the k loop.
    a_transposed: store the A tile as [k][i] in shared memory.
    a_ahead: with local_ab and A stored [i][k], load a thread's A for `a_ahead` k steps at once,
    a float4 along k per row, instead of one scalar per row and k step.
    through_registers: with stages=2, each thread loads its share of the next tiles into registers
    at the top of a k step and stores them into shared memory after computing on the current ones
    (the loads' latency hides behind the arithmetic); a thread's share is adjacent rows, so that
    its registers are one small array.
    a_lanes_down: with through_registers and a_transposed, the lanes of a warp take consecutive
    rows of the A tile (each thread a run along k of one row), so that the transposed stores of
    a warp hit 32 different banks; otherwise 4 lanes share a row and 2 lanes a bank.
    fragments_ahead: pipeline the k1 loop too: load a thread's A and B values of k step k1+1 from
    shared memory into registers while computing on those of k1.
    """
    ly, lx, by, bx, tk = tiles
    wj = wj or lx
    wi = wi or ly
    sch, blk, c_local = accumulate_in_registers(M, N, K, tiles, pad_shape)
    i, j, k = sch.get_loops(blk)
    i0, iv, i1, iw = sch.split(i, [None, ly // wi, by, wi])
    j0, jv, j1, jw = sch.split(j, [None, lx // wj, bx, wj])
    if a_ahead:
        k0, ka, k1 = sch.split(k, [None, tk // a_ahead, a_ahead])
        sch.reorder(i0, j0, iv, jv, i1, j1, k0, ka, k1, iw, jw)
    else:
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
        if through_registers:
            r = sch.cache_read(s, 0, "local")
            sch.compute_at(r, k0)
            chunks = (by * ly * tk if idx == 0 else tk * bx * lx) // vec
            for stage in (r, s):  # the same threads copy the same elements: registers, then shared
                rows, cols = sch.get_loops(stage)[-2:]
                if idx == 0 and a_lanes_down:  # lane = row: each thread a run of k of one row
                    c0, r1, v = sch.split(cols, [by * bx // (by * ly), None, vec])
                    sch.reorder(c0, rows, r1, v)
                    threads = sch.fuse(c0, rows)
                else:
                    r0, r1 = sch.split(rows, [None, chunks // (by * bx)])  # adjacent rows per thread
                    c0, v = sch.split(cols, [None, vec])
                    sch.reorder(r0, c0, r1, v)
                    threads = sch.fuse(r0, c0)
                ty, tx = sch.split(threads, [by, bx])
                sch.bind(ty, "threadIdx.y")
                sch.bind(tx, "threadIdx.x")
                sch.unroll(r1)
                sch.vectorize(v)
        if idx == 0 and a_transposed:
            sch.transform_layout(s, ("write", 0), lambda a, b: (b, a))
        if not through_registers:  # the shared copy's own loops (through_registers split them above)
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
    if local_ab and a_ahead:  # A: wi rows x a_ahead k values, along k; B: one k step's wj columns
        registers(sch, blk, None, (a_ahead, wj), loops=(ka, k1))
    elif local_ab:
        registers(sch, blk, k1, (wi, wj))
    finish(sch, blk, k0, ((ka,) if a_ahead else ()) + (k1, iw, jw), pad_shape)
    if fragments_ahead:  # children of k1: A to registers, B to registers, the multiply-adds
        sch.annotate(k1, "software_pipeline_stage", [0, 0, 1])
        sch.annotate(k1, "software_pipeline_order", [0, 1, 2])
    compute = 3 if fragments_ahead else 1  # a pipelined k1 nest becomes prologue, loop and epilogue
    if stages and through_registers:
        # children of k0: A to registers, A to shared, the same for B, the k1 compute nest: load the
        # next tiles into registers first, compute on the current ones, then store the next ones
        sch.annotate(k0, "software_pipeline_stage", [0, 0, 0, 0] + [1] * compute)
        sch.annotate(k0, "software_pipeline_order", [0, 2 + compute, 1, 3 + compute] + [2 + n for n in range(compute)])
    elif stages:
        # children of k0: A fetch, B fetch, k1 compute nest
        sch.annotate(k0, "software_pipeline_stage", [0, 0] + [stages - 1] * compute)
        sch.annotate(k0, "software_pipeline_order", pipeline_order or list(range(2 + compute)))
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


def sweep_variants() -> list[tuple]:
    """(name, shape, builder(M, N, K)) of every variant, the most promising first: the time guard
    cuts from the end."""
    S, R, P = SQUARE, RECT, PADDED
    V = []

    def add(name, shape, fn):
        V.append((name, shape, fn))

    # shapes the tiles do not divide, padded (pad_einsum)
    add("lb (8, 8, 16, 16, 8) wj4 lab padded", P,
        lambda M, N, K: local_blocking(M, N, K, (8, 8, 16, 16, 8), wj=4, local_ab=True, pad=True))
    add("sh (8, 8, 16, 16, 8) At lab pad4 padded", P,
        lambda M, N, K: shared_blocking(M, N, K, (8, 8, 16, 16, 8), 4, pad=4, wj=4, wi=4, local_ab=True,
                                        a_transposed=True, pad_shape=True))
    add("sh (8, 8, 16, 16, 8) lab pad4 padded", P,
        lambda M, N, K: shared_blocking(M, N, K, (8, 8, 16, 16, 8), 4, pad=4, wj=4, wi=4, local_ab=True, pad_shape=True))
    add("sh (8, 8, 16, 16, 8) lab pad4 padded 1000x1000x1001", (1000, 1000, 1001),
        lambda M, N, K: shared_blocking(M, N, K, (8, 8, 16, 16, 8), 4, pad=4, wj=4, wi=4, local_ab=True, pad_shape=True))

    def ladder(shape, *last):
        """The ladder's thread-block steps at `shape`, then the (name, builder) pairs `last`."""
        for name, fn in [("1d threads tx32", threads_1d), ("2d threads 32x32", threads_2d),
                         ("2d threads 32x32 strided", functools.partial(threads_2d, strided=True)),
                         ("2d threads 16x16", functools.partial(threads_2d, ty=16, tx=16)), *last]:
            add(name, shape, fn)

    # the ladder's first steps at the seed's shape (fast)
    ladder(R, ("naive 1 thread/block", naive), ("naive 256/block", naive_256))

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
    ladder(S, ("dlight default", dlight_default), ("naive 1 thread/block", naive))

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


# ------------------------------------------------------------------ the notebooks' own schedules


def notebook_variants() -> list[Variant]:
    """The schedule functions of notebooks 03 and 04 (read from the notebooks) on the variants
    they measure, and on what they measure only live (cp.async, padded shapes, the ladder at 4096^3)."""
    n3 = notebook_functions("03_matmul_local_blocking", {
        "matmul_module", "naive", "threads_1d", "threads_2d", "local_blocking", "zero_first", "unroll_tile",
        "stage_in_registers", "vectorize_loads", "in_registers", "interleaved", "schedule", "full_kernel", "padded",
        "inline_padding"})
    n4 = notebook_functions("04_matmul_shared_blocking", {
        "matmul_module", "schedule", "threads_2d", "tile_block", "loop", "unroll_tile", "zero_first", "shared_tiles",
        "stage_in_shared", "cooperative_fetch", "shared_kernel", "stage_in_registers", "pad_rows", "transpose_a",
        "interleaved", "transposed", "padded_ik", "strided_fetch", "strided", "pipeline", "async_copies",
        "fetch_through_registers", "prefetched", "padded", "inline_padding"})
    S, R, P = SQUARE, RECT, PADDED
    ASYNC = {"tirx.use_async_copy": True}
    T16, T8, L4 = (8, 8, 16, 16, 16), (8, 8, 16, 16, 8), (8, 8, 8, 8, 4)
    z, sch = n4.zero_first, n4.schedule
    V = [  # (name, shape, builder, pass config): the notebooks' step functions, composed as the notebooks do
        ("03 local padded (8,8,16,16,8)", P, lambda s: n3.zero_first(n3.inline_padding(n3.stage_in_registers(
            n3.unroll_tile(n3.interleaved(n3.padded(s, T8), T8))))), {}),
        ("04 shared padded (8,8,16,16,8) At pad4", P, lambda s: z(n4.inline_padding(n4.transposed(n4.padded(s, T8), T8))), {}),
        ("04 pipe2 cp.async A[i][k] pad4 T16", S, lambda s: z(n4.async_copies(n4.pipeline(n4.padded_ik(sch(s), T16)))), ASYNC),
        ("04 pipe2 A[i][k] pad4 T16 (sync)", S, lambda s: z(n4.pipeline(n4.padded_ik(sch(s), T16))), {}),
        ("04 pipe2 At pad4 T16", S, lambda s: z(n4.pipeline(n4.transposed(sch(s), T16))), {}),
        ("04 through registers At pad4 T16", S, lambda s: z(n4.prefetched(sch(s), T16)), {}),
        ("04 pipe2 At pad4 T16", R, lambda s: z(n4.pipeline(n4.transposed(sch(s), T16))), {}),
        ("04 pipe3 cp.async A[i][k] pad4 (8,8,16,16,8)", S,
         lambda s: z(n4.async_copies(n4.pipeline(n4.padded_ik(sch(s), T8), stages=3))), ASYNC),
        ("04 pipe2 At pad4 (8,8,8,16,16)", S, lambda s: z(n4.pipeline(n4.transposed(sch(s), (8, 8, 8, 16, 16)))), {}),
        ("04 pipe2 At pad4 (8,8,16,16,8)", S, lambda s: z(n4.pipeline(n4.transposed(sch(s), T8))), {}),
        ("04 seed (8,8,8,8,8)", S, lambda s: z(n4.shared_kernel(sch(s), (8, 8, 8, 8, 8))), {}),
        ("04 seed (8,8,8,8,8)", R, lambda s: z(n4.shared_kernel(sch(s), (8, 8, 8, 8, 8))), {}),
        ("04 128x128 contiguous + registers T16", S, lambda s: z(n4.stage_in_registers(n4.shared_kernel(sch(s), T16))), {}),
        ("04 interleaved A[i][k] T16", S, lambda s: z(n4.interleaved(sch(s), T16)), {}),
        ("04 interleaved A[i][k] padded T16", S, lambda s: z(n4.padded_ik(sch(s), T16)), {}),
        ("04 interleaved A[k][i] T16", S,
         lambda s: z(n4.stage_in_registers(n4.transpose_a(n4.shared_kernel(sch(s), T16, width=4)))), {}),
        ("04 interleaved A[k][i] padded T16", S, lambda s: z(n4.transposed(sch(s), T16)), {}),
        ("04 fetch vec2 T16", S, lambda s: z(n4.transposed(sch(s), T16, vec=2)), {}),
        ("03 local (8,8,8,8,4) + unroll", S, lambda s: n3.zero_first(n3.unroll_tile(n3.local_blocking(*s, L4))), {}),
        ("03 local (8,8,8,8,4) + unroll + registers", S, lambda s: n3.zero_first(n3.in_registers(n3.local_blocking(*s, L4))), {}),
        ("03 local (8,8,8,8,4) + unroll + registers + interleave", S, lambda s: n3.full_kernel(s, L4), {}),
        ("03 local (8,8,8,8,4) + unroll + registers + interleave", R, lambda s: n3.full_kernel(s, L4), {}),
        ("03 local (8,8,8,16,4) full", S, lambda s: n3.full_kernel(s, (8, 8, 8, 16, 4)), {}),
        ("03 local (4,8,16,16,4) full", S, lambda s: n3.full_kernel(s, (4, 8, 16, 16, 4)), {}),
        ("03 1D threads", S, lambda s: n3.threads_1d(*s), {}),
        ("03 2D threads", S, lambda s: n3.threads_2d(*s), {}),
        ("03 naive", S, lambda s: n3.naive(*s), {}),
    ]
    return [Variant(name, functools.partial(fn, shape), shape, config) for name, shape, fn, config in V]


# ------------------------------------------------------------------ running


def sweep_variant(name, shape, fn) -> Variant:
    # cp.async (global -> shared without registers) needs this compiler option
    return Variant(name, functools.partial(fn, *shape), shape, {"tirx.use_async_copy": "async" in name})


def check(shape) -> MatmulCheck:
    return MatmulCheck(shape, "float32", b_transposed=False, precision="float32")


def timing(first_ms: float) -> dict:
    """Few repeats for slow kernels (the naive one takes a second), longer rounds for fast ones."""
    return dict(repeat=2 if first_ms > 100 else 5, warmup=1, min_repeat_ms=0 if first_ms > 20 else 15)


def measure(variants: list[Variant], shapes, budget_s: float, rerun=None) -> int:
    deadline = time.time() + budget_s
    cublas = {}
    for shape in shapes:
        cublas[shape] = helpers.cublas_time(*shape, "float32", repeat=10)
        print(f"cuBLAS fp32 {shape}: {cublas[shape]:.4f} ms = {2 * np.prod(shape) / cublas[shape] / 1e9:.2f} TFLOP/s",
              flush=True)
    results = measure_matmuls(variants, check, 1e-4, timing, deadline)
    if rerun:
        again = rerun(results)
        results += measure_matmuls(again, check, 1e-4, timing, deadline)
        variants = variants + again
    for prefix in ("sh ", "lb ") if rerun else ("",):
        print_ptxas([r for r in results if r.name.startswith(prefix)], variants, 4,
                    f"the fastest '{prefix.strip()}' variants" if prefix else "the fastest variants")
    print()
    matmul_table(results, cublas, "fp32; % of cuBLAS fp32 (TF32 off) of the same shape, same run")
    return 0


def sweep(args) -> int:
    variants = only([sweep_variant(*v) for v in sweep_variants()], args.only)
    if args.dry:
        return dry_run(variants)
    builders = {name: fn for name, _, fn in sweep_variants()}

    def best_three_at_rect(results):
        """The three fastest of each family (shared, local) at 4096^3, again at 1024 x 512 x 2048."""
        square = [r for r in results if r.ms and tuple(r.shape) == SQUARE]
        return [sweep_variant(r.name, RECT, builders[r.name])
                for prefix in ("sh ", "lb ")
                for r in sorted((r for r in square if r.name.startswith(prefix)), key=lambda r: r.ms)[:3]]

    return measure(variants, [SQUARE, RECT], 215, best_three_at_rect)


def notebook_schedules(args) -> int:
    variants = only(notebook_variants(), args.only)
    if args.dry:
        return dry_run(variants)
    return measure(variants, [SQUARE, RECT, PADDED], 200)


# ------------------------------------------------------------------ fp32-limit: the last points to cuBLAS


# StorageRewrite turns a shared tile that is only ever read as float4 into an array of float4, and
# the cp.async injection, which runs after it, then fails on the copies into it: keep it off there.
ASYNC_AHEAD = {"tirx.use_async_copy": True, "tirx.disable_storage_rewrite": True}
T16, T8, T16_64 = (8, 8, 16, 16, 16), (8, 8, 16, 16, 8), (8, 8, 8, 16, 16)
AT2 = dict(a_transposed=True, stages=2)
LIMIT = {  # name: (tiles, options of shared_blocking beyond the interleaved, padded, staged base, pass config)
    "04's best: A [k][i], 2 stages": (T16, AT2, {}),
    # a thread tile of 128 outputs, as cuBLAS's own fp32 kernel has (see `profile`): 8 warps per SM
    "128x128, 128 threads of 16x8, tk 8, 2 stages": ((16, 8, 8, 16, 8), AT2, {}),
    "128x128, 128 threads of 16x8, tk 8, 3 stages": ((16, 8, 8, 16, 8), dict(a_transposed=True, stages=3), {}),
    "128x128, 128 threads of 16x8, tk 16, 2 stages": ((16, 8, 8, 16, 16), AT2, {}),
    "128x128, 128 threads of 8x16, tk 8, 2 stages": ((8, 16, 16, 8, 8), AT2, {}),
    "128x128, 128 threads of 8x16, tk 16, 2 stages": ((8, 16, 16, 8, 16), AT2, {}),
    "256x128, 256 threads of 16x8, tk 8, 2 stages": ((16, 8, 16, 16, 8), AT2, {}),
    "128x256, 256 threads of 8x16, tk 8, 2 stages": ((8, 16, 16, 16, 8), AT2, {}),
    # the next tiles loaded into registers before computing on the current ones, stored after
    "through registers, A [k][i], tk 16": (T16, dict(AT2, through_registers=True), {}),
    "through registers, fragments ahead, A [k][i], tk 16": (T16, dict(AT2, through_registers=True, fragments_ahead=True), {}),
    "through registers, fragments ahead, A [k][i], tk 8": (T8, dict(AT2, through_registers=True, fragments_ahead=True), {}),
    "fragments ahead, A [k][i], 2 stages": (T16, dict(AT2, fragments_ahead=True), {}),
    "through registers, A [k][i], tk 8": (T8, dict(AT2, through_registers=True), {}),
    "through registers, lanes down A, tk 16": (T16, dict(AT2, through_registers=True, a_lanes_down=True), {}),
    "through registers, lanes down A, fragments ahead, tk 16":
        (T16, dict(AT2, through_registers=True, a_lanes_down=True, fragments_ahead=True), {}),
    "through registers, lanes down A, 64x128, tk 16": (T16_64, dict(AT2, through_registers=True, a_lanes_down=True), {}),
    "through registers, A [k][i], tk 32": ((8, 8, 16, 16, 32), dict(AT2, through_registers=True), {}),
    "through registers, 64x128, A [k][i], tk 16": (T16_64, dict(AT2, through_registers=True), {}),
    "through registers, 128x128 by 128 threads of 16x8, tk 16": ((16, 8, 8, 16, 16), dict(AT2, through_registers=True), {}),
    # A kept [i][k], as cp.async copies it, and read several k steps ahead, a float4 along k per row
    "A [i][k], cp.async, 2 stages": (T16, dict(stages=2, async_copy=True), {"tirx.use_async_copy": True}),
    "A [i][k] 4 k ahead, cp.async, 2 stages": (T16, dict(stages=2, async_copy=True, a_ahead=4), ASYNC_AHEAD),
    "A [i][k] 4 k ahead, 2 stages": (T16, dict(stages=2, a_ahead=4), {}),
    "A [i][k] 2 k ahead, cp.async, 2 stages": (T16, dict(stages=2, async_copy=True, a_ahead=2), ASYNC_AHEAD),
    "A [i][k] 8 k ahead, cp.async, 2 stages": (T16, dict(stages=2, async_copy=True, a_ahead=8), ASYNC_AHEAD),
    "tk 8, A [i][k] 4 k ahead, cp.async, 3 stages": (T8, dict(stages=3, async_copy=True, a_ahead=4), ASYNC_AHEAD),
    "tk 8, A [i][k] 4 k ahead, cp.async, 4 stages": (T8, dict(stages=4, async_copy=True, a_ahead=4), ASYNC_AHEAD),
    "64x128, A [i][k] 4 k ahead, cp.async, 2 stages": (T16_64, dict(stages=2, async_copy=True, a_ahead=4), ASYNC_AHEAD),
    "64x128, A [i][k] 4 k ahead, cp.async, 3 stages": (T16_64, dict(stages=3, async_copy=True, a_ahead=4), ASYNC_AHEAD),
}


def limit_variant(name: str, shape=SQUARE) -> Variant:
    tiles, options, config = LIMIT[name]
    return Variant(name, lambda: shared_blocking(*shape, tiles, 4, pad=4, wj=4, wi=4, local_ab=True, **options),
                   shape, config)


def fp32_limit(args) -> int:
    """Each variant checked against torch's fp32 product, then timed in rounds alternating with
    cuBLAS fp32 (TF32 off): the median of the per-round ratios, as the notebooks report them."""
    variants = only([limit_variant(name) for name in LIMIT], args.only)
    if args.dry:
        return dry_run(variants)
    data = check(SQUARE)
    blas = baselines.event_rounds(*baselines.cublas_call(*SQUARE, "float32"))

    def ptxas(v, sch):
        with tvm.transform.PassContext(config=v.pass_config):
            return "; ".join(f"{r.registers} registers, {r.shared_bytes / 1024:.1f} KB" for r in helpers.ptxas_report(sch))

    return beside_cublas(variants, lambda _: data, lambda _: blas, 1e-4,
                         f"{helpers.local_gpu_spec().name}, fp32 {'x'.join(map(str, SQUARE))}; cuBLAS fp32, TF32 off",
                         extra=("registers, shared", ptxas))


FP32_PROFILED = {"notebook": "04's best: A [k][i], 2 stages", "ahead": "A [i][k] 4 k ahead, cp.async, 2 stages"}
FP32_KERNELS = (*FP32_PROFILED, "cublas", *LIMIT)  # a short name, cuBLAS or any variant of fp32-limit
FP32_KERNELS_SAID = f"{', '.join(FP32_PROFILED)}, cublas or a variant of fp32-limit"
FP32_ROWS = ncu_rows(2.0 * np.prod(SQUARE), {
    "FMA pipe busy (% of cycles)": lambda m: ncu_first(m, "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
                                                       "sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active"),
    "FP32 issue rate (% of peak)": lambda m: ncu_first(m, "sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active",
                                                       "sm__inst_executed_pipe_fmaheavy.avg.pct_of_peak_sustained_active"),
    "shared-memory pipe (LSU) busy (%)": lambda m: ncu_first(m, "sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active",
                                                             "sm__pipe_shared_cycles_active.avg.pct_of_peak_sustained_active"),
})


def fp32_launch(args) -> int:
    """Launch one fp32 kernel 4 times on uniform(-1, 1) inputs (ncu profiles the third); check its
    first 256 rows against float64. "cublas" is torch's fp32 matmul, TF32 off."""
    M, N, K = SQUARE
    rng = np.random.default_rng(0)
    a, b = rng.uniform(-1, 1, (M, K)).astype("float32"), rng.uniform(-1, 1, (K, N)).astype("float32")
    variant = None if args.kernel == "cublas" else limit_variant(FP32_PROFILED.get(args.kernel, args.kernel))
    return launch_checked(args.kernel, a, b, variant, "float32")


def fp32_profile(args) -> int:
    """04's best kernel, the fastest of fp32-limit and cuBLAS's own fp32 kernel under Nsight Compute."""
    kernels = args.kernel or [*FP32_PROFILED, "cublas"]
    if args.dry:
        return dry_run([limit_variant(FP32_PROFILED.get(k, k)) for k in kernels if k != "cublas"])
    return profile_side_by_side(__file__, kernels, FP32_ROWS, f"{'x'.join(map(str, SQUARE))} fp32 (cuBLAS: TF32 off)",
                                ("fma", "fp32", "lsu", "shared", *NCU_MENTIONED))


STUDIES = {
    "sweep": Study(sweep, "fp32 local and shared blocking over tiles, layouts, fetches and pipelines",
                   arguments=(ONLY,)),
    "notebook-schedules": Study(notebook_schedules, "notebooks 03 and 04's own schedule functions on their "
                                "variants", arguments=(ONLY,)),
    "fp32-limit": Study(fp32_limit, "around 04's best: A kept [i][k] and read a few k steps ahead as float4, "
                        "cp.async, depths and tiles, each timed interleaved with cuBLAS", arguments=(ONLY,)),
    "profile": Study(fp32_profile, "Nsight Compute side by side: 04's best, fp32-limit's best and cuBLAS's fp32 kernel",
                     needs=("ncu",), arguments=((("kernel",), dict(
                         nargs="*", type=one_of(FP32_KERNELS, f"{FP32_KERNELS_SAID} (its --dry lists them)"),
                         metavar="KERNEL", help=f"{FP32_KERNELS_SAID} (default: all three)")),)),
    "launch": Study(fp32_launch, "(run by profile under ncu) build, check and launch one kernel", dry=False,
                    logged=False, arguments=((("kernel",), dict(choices=FP32_KERNELS)),)),
}

if __name__ == "__main__":
    sys.exit(cli(__file__, __doc__, STUDIES))
