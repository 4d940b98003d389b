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

import helpers
from helpers import baselines
from matmul_fp32 import dlight_default, local_blocking, naive, naive_256, shared_blocking, threads_1d, threads_2d
from ncu import NCU_MENTIONED, launch_checked, ncu_first, ncu_rows, profile_side_by_side
from study import Study, cli, one_of
from variants import (MatmulCheck, ONLY, Variant, beside_cublas, dry_run, matmul_table, measure_matmuls, only,
                      print_ptxas)

SQUARE, RECT, PADDED = (4096, 4096, 4096), (1024, 512, 2048), (1000, 1000, 1000)


# ------------------------------------------------------------------ the variants


def sweep_variants() -> list[tuple]:
    """(name, shape, builder(M, N, K)) of every variant, the most promising first: the time guard
    cuts from the end."""
    V = []

    def add(name, shape, fn):
        V.append((name, shape, fn))

    padded_shapes(add)
    ladder(add, RECT, ("naive 1 thread/block", naive), ("naive 256/block", naive_256))  # the first steps (fast)
    shared_tiles(add)  # 04: shared-memory blocking, the most important goal
    shared_pipelines_and_fetches(add)
    local_tiles(add)  # 03: local blocking (no shared memory)
    ladder(add, SQUARE, ("dlight default", dlight_default), ("naive 1 thread/block", naive))
    return sorted(V, key=priority)


def padded_shapes(add):
    """Shapes the tiles do not divide, padded (pad_einsum)."""
    P = PADDED
    add("lb (8, 8, 16, 16, 8) wj4 lab padded", P,
        lambda M, N, K: local_blocking(M, N, K, (8, 8, 16, 16, 8), wj=4, local_ab=True, pad=True))
    add("sh (8, 8, 16, 16, 8) At lab pad4 padded", P,
        lambda M, N, K: shared_blocking(M, N, K, (8, 8, 16, 16, 8), 4, pad=4, wj=4, wi=4, local_ab=True,
                                        a_transposed=True, pad_shape=True))
    add("sh (8, 8, 16, 16, 8) lab pad4 padded", P,
        lambda M, N, K: shared_blocking(M, N, K, (8, 8, 16, 16, 8), 4, pad=4, wj=4, wi=4, local_ab=True, pad_shape=True))
    add("sh (8, 8, 16, 16, 8) lab pad4 padded 1000x1000x1001", (1000, 1000, 1001),
        lambda M, N, K: shared_blocking(M, N, K, (8, 8, 16, 16, 8), 4, pad=4, wj=4, wi=4, local_ab=True, pad_shape=True))


def ladder(add, shape, *last):
    """The ladder's thread-block steps at `shape`, then the (name, builder) pairs `last`."""
    for name, fn in [("1d threads tx32", threads_1d), ("2d threads 32x32", threads_2d),
                     ("2d threads 32x32 strided", functools.partial(threads_2d, strided=True)),
                     ("2d threads 16x16", functools.partial(threads_2d, ty=16, tx=16)), *last]:
        add(name, shape, fn)


def shared_tiles(add):
    """04's shared-memory blocking over block and thread tiles, layouts and fetch widths."""
    S = SQUARE
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


def shared_pipelines_and_fetches(add):
    """Software pipelines of the shared tiles, coalescing of the fetch, and the bank-conflict demos."""
    S = SQUARE
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


def local_tiles(add):
    """03's local blocking: a thread's tile in registers, no shared memory."""
    S = SQUARE
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


MAIN4 = ("(8, 8, 16, 16, 8)", "(8, 8, 16, 16, 16)", "(8, 8, 8, 16, 8)", "(8, 8, 8, 16, 16)")  # the main tiles


def priority(v) -> int:
    """A sweep variant's rank: the most promising first, as the time guard cuts from the end."""
    name, shape = v[0], v[1]
    if shape not in (RECT, SQUARE) or shape == RECT or "seed" in name or name.startswith("sh (4,4,16,16,16)"):
        return 0
    if name.startswith("sh ") and any(t in name for t in MAIN4):
        return 1
    if name.startswith("lb ") and ("(8, 8, 16, 16, 8)" in name or "(8, 8, 8, 16, 8)" in name or "unrolled" in name):
        return 2
    if name.startswith("sh "):
        return 3
    if name.startswith("lb "):
        return 4
    return 5


# ------------------------------------------------------------------ the notebooks' own schedules


def notebook_variants() -> list[Variant]:
    """The schedule functions of notebooks 03 and 04 (their exports, helpers.lessons) on the variants
    they measure, and on what they measure only live (cp.async, padded shapes, the ladder at 4096^3)."""
    n3 = helpers.lessons.lesson("03_matmul_local_blocking")  # their exported cells
    n4 = helpers.lessons.lesson("04_matmul_shared_blocking")
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
