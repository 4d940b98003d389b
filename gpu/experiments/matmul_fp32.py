"""The fp32 matmul schedules of 03_04_matmul.py's studies: notebook 03's ladder (one thread per
output up to a thread's tile in registers) and notebook 04's shared-memory blocking with every
option the sweep and fp32-limit vary. Each function returns a Schedule of C = A @ B (float32)."""

from __future__ import annotations

import tvm
from tvm import s_tir

import helpers


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
    k0, ka, k1, iw, jw = _block_tile(sch, blk, c_local, tiles, wi, wj, a_ahead, fuse_threads)
    for idx in (0, 1):
        _stage_in_shared(sch, blk, k0, idx, tiles, vec, pad, a_transposed, fuse_threads, fetch_strided,
                         through_registers, a_lanes_down)
    if local_ab and a_ahead:  # A: wi rows x a_ahead k values, along k; B: one k step's wj columns
        registers(sch, blk, None, (a_ahead, wj), loops=(ka, k1))
    elif local_ab:
        registers(sch, blk, k1, (wi, wj))
    finish(sch, blk, k0, ((ka,) if a_ahead else ()) + (k1, iw, jw), pad_shape)
    _pipeline(sch, k0, k1, stages, async_copy, pipeline_order, through_registers, fragments_ahead)
    return sch


def _block_tile(sch, blk, c_local, tiles, wi, wj, a_ahead, fuse_threads):
    """Split the matmul's i, j and k into blocks, virtual threads (a thread's rows and columns in
    groups of wi and wj), threads and a thread's tile, with k in steps of tk (of a_ahead k values
    each when a_ahead), and bind them; C_local is written back per thread. Returns k0, ka (None
    without a_ahead), k1 and a thread's innermost iw, jw."""
    ly, lx, by, bx, tk = tiles
    i, j, k = sch.get_loops(blk)
    i0, iv, i1, iw = sch.split(i, [None, ly // wi, by, wi])
    j0, jv, j1, jw = sch.split(j, [None, lx // wj, bx, wj])
    ka = None
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
    return k0, ka, k1, iw, jw


def _stage_in_shared(sch, blk, k0, idx, tiles, vec, pad, a_transposed, fuse_threads, fetch_strided,
                     through_registers, a_lanes_down):
    """Operand `idx` (0: A, 1: B) copied into shared memory once per k step by all the block's
    threads, `vec` floats at a time (through registers with `through_registers`), A's tile stored
    [k][i] with `a_transposed`, rows padded by `pad` floats."""
    ly, lx, by, bx, tk = tiles
    s = sch.cache_read(blk, idx, "shared")
    sch.compute_at(s, k0)
    if through_registers:
        _fetch_through_registers(sch, s, k0, idx, tiles, vec, a_lanes_down)
    if idx == 0 and a_transposed:
        sch.transform_layout(s, ("write", 0), lambda a, b: (b, a))
    if not through_registers:  # the shared copy's own loops (through_registers split them above)
        _cooperative_fetch(sch, s, by, bx, vec, fuse_threads, fetch_strided)
    if pad:  # row stride = row length + pad (mod 32 banks)
        row = tk if (idx == 0 and not a_transposed) else (by * ly if idx == 0 else bx * lx)
        sch.storage_align(s, 0, axis=0, factor=min(row, 32), offset=pad)


def _fetch_through_registers(sch, s, k0, idx, tiles, vec, a_lanes_down):
    """The shared copy `s` staged in registers: each thread loads its share (adjacent rows, or with
    `a_lanes_down` one row of A per lane) into registers, then stores the same elements into shared."""
    ly, lx, by, bx, tk = tiles
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


def _cooperative_fetch(sch, s, by, bx, vec, fuse_threads, fetch_strided):
    """The shared copy `s` split over the block's by x bx threads, `vec` floats per load: a warp's
    reads contiguous, or with `fetch_strided` each thread a contiguous run (a warp's reads strided)."""
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


def _pipeline(sch, k0, k1, stages, async_copy, pipeline_order, through_registers, fragments_ahead):
    """The software pipelines: k1's (fragments ahead: A and B of the next k1 step loaded into
    registers during this one's multiply-adds) and k0's over `stages` shared tiles (cp.async with
    `async_copy`; through registers: the next tiles loaded first, stored after the compute)."""
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


def dlight_default(M, N, K):
    from tvm.s_tir import dlight as dl

    mod = matmul_module(M, N, K)
    target = helpers.make_target()
    with target:
        mod = dl.ApplyDefaultSchedule(dl.gpu.Matmul())(mod)
    return mod
