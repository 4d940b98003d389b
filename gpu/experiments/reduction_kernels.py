"""Notebook 09's computations (row sums, softmax, layer norm; the softmax, the online softmax and
Welford's layer norm are the notebook's own definitions) and the schedules 09_reductions.py's studies vary."""

from __future__ import annotations


import tvm
from tvm import s_tir
from tvm.script import ir as I
from tvm.script import tirx as T

import helpers


# ------------------------------------------------------------------ the computations


def rowsum_module(M, N, dtype="float32"):
    @I.ir_module
    class RowSum:
        @T.prim_func(s_tir=True)
        def main(X: T.Buffer((M, N), dtype), S: T.Buffer((M,), "float32")):
            T.func_attr({"tirx.noalias": True})
            for i, k in T.grid(M, N):
                with T.sblock("S"):
                    vi, vk = T.axis.remap("SR", [i, k])
                    with T.init():
                        S[vi] = T.float32(0)
                    S[vi] = S[vi] + T.Cast("float32", X[vi, vk])
    return RowSum


def vector_sum_module(n):
    @I.ir_module
    class VectorSum:
        @T.prim_func(s_tir=True)
        def main(X: T.Buffer((n,), "float32"), S: T.Buffer((1,), "float32")):
            T.func_attr({"tirx.noalias": True})
            for k in range(n):
                with T.sblock("S"):
                    vk = T.axis.reduce(n, k)
                    with T.init():
                        S[0] = T.float32(0)
                    S[0] = S[0] + X[vk]
    return VectorSum


def _notebook09():
    """Notebook 09's softmax, online softmax and layer norm, as the notebook defines them (its exports)."""
    return helpers.lessons.lesson("09_reductions")


def softmax_module(M, N, dtype="float16"):
    """Notebook 09's softmax in three passes over the row: maximum, sum of exponentials, normalize."""
    return _notebook09().softmax(M, N, dtype)


def online_softmax_module(M, N, lanes, dtype="float16"):
    """Notebook 09's online softmax: each of `lanes` lanes keeps a running maximum and sum."""
    return _notebook09().online_softmax(M, N, lanes, dtype)


def layer_norm_module(M, N, lanes, dtype="float16", eps=1e-5):
    """Notebook 09's layer norm: Welford in each of `lanes` lanes, Chan across them."""
    return _notebook09().layer_norm(M, N, lanes, dtype, eps)


def layer_norm_two_pass_module(M, N, dtype="float16", eps=1e-5):
    """Mean, then the mean of squared deviations: the formulation a graph compiler lowers, for dlight."""
    @I.ir_module
    class LayerNorm2:
        @T.prim_func(s_tir=True)
        def main(X: T.Buffer((M, N), dtype), W: T.Buffer((N,), dtype), B: T.Buffer((N,), dtype),
                 Y: T.Buffer((M, N), dtype)):
            T.func_attr({"tirx.noalias": True})
            mean = T.sblock_alloc_buffer((M,), "float32")
            var = T.sblock_alloc_buffer((M,), "float32")
            for i, k in T.grid(M, N):
                with T.sblock("mean"):
                    vi, vk = T.axis.remap("SR", [i, k])
                    with T.init():
                        mean[vi] = T.float32(0)
                    mean[vi] = mean[vi] + T.Cast("float32", X[vi, vk]) * T.float32(1.0 / N)
            for i, k in T.grid(M, N):
                with T.sblock("var"):
                    vi, vk = T.axis.remap("SR", [i, k])
                    with T.init():
                        var[vi] = T.float32(0)
                    var[vi] = var[vi] + (T.Cast("float32", X[vi, vk]) - mean[vi]) * (T.Cast("float32", X[vi, vk]) - mean[vi]) * T.float32(1.0 / N)
            for i, j in T.grid(M, N):
                with T.sblock("norm"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    Y[vi, vj] = T.Cast(dtype, (T.Cast("float32", X[vi, vj]) - mean[vi]) * T.rsqrt(var[vi] + T.float32(eps))
                                       * T.Cast("float32", W[vj]) + T.Cast("float32", B[vj]))
    return LayerNorm2


# ------------------------------------------------------------------ the schedules


def thread_per_row(mod, threads=256):
    sch = s_tir.Schedule(mod)
    i, _ = sch.get_loops(sch.get_sblock("S"))
    bx, tx = sch.split(i, [None, threads])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    return sch


def rows_per_block(mod, lanes, rows=1, vector=1):
    """Row sums: `rows` rows per block (threadIdx.y), `lanes` threads per row (threadIdx.x), each
    thread loading `vector` consecutive elements at a time."""
    sch = s_tir.Schedule(mod)
    blk = sch.get_sblock("S")
    i, k = sch.get_loops(blk)
    bx, ty = sch.split(i, [None, rows])
    r, tx, v = sch.split(k, [None, lanes, vector])
    sch.reorder(bx, ty, tx, r, v)
    sch.bind(bx, "blockIdx.x")
    sch.bind(ty, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")
    if vector > 1:
        xl = sch.cache_read(blk, 0, "local")
        sch.compute_at(xl, r)
        sch.vectorize(sch.get_loops(xl)[-1])
    return sch


def two_stages(mod, blocks=1024, threads=256, vector=4):
    """One long vector: `blocks` partial sums (rfactor), then one block sums them."""
    sch = s_tir.Schedule(mod)
    blk = sch.get_sblock("S")
    (k,) = sch.get_loops(blk)
    kb, kr, kt, kv = sch.split(k, [blocks, None, threads, vector])
    rf = sch.rfactor(kb, 0)
    kb, kr, kt, kv = sch.get_loops(rf)
    sch.reorder(kb, kt, kr, kv)
    sch.bind(kb, "blockIdx.x")
    sch.bind(kt, "threadIdx.x")
    xl = sch.cache_read(rf, 0, "local")
    sch.compute_at(xl, kr)
    sch.vectorize(sch.get_loops(xl)[-1])
    (k2,) = sch.get_loops(blk)
    r2, t2 = sch.split(k2, [None, threads])
    sch.bind(t2, "threadIdx.x")
    sch.bind(sch.add_unit_loop(r2), "blockIdx.x")
    return sch


def three_kernels(mod, threads=256):
    """Softmax: each block a kernel of its own, a block of `threads` per row."""
    sch = s_tir.Schedule(mod)
    for name in ("max", "sum", "norm"):
        blk = sch.get_sblock(name)
        i, k = sch.get_loops(blk)
        r, tx = sch.split(k, [None, threads])
        sch.reorder(tx, r)
        sch.bind(i, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
    return sch


def fused_rows(mod, lanes, rows=1, vector=8, stage="shared.dyn", stats="shared"):
    """Any of the row modules (softmax, online softmax, layer norm) as one kernel: `rows` rows per
    block, `lanes` threads per row; the statistics computed at the row (compute_at), the output
    written `vector` elements at a time from registers; the row staged once in `stage` memory
    (None: read from global memory by every pass)."""
    sch = s_tir.Schedule(mod)
    norm = sch.get_sblock("norm")
    i, j = sch.get_loops(norm)
    bx, ty = sch.split(i, [None, rows])
    r, tx, v = sch.split(j, [None, lanes, vector])
    sch.reorder(tx, r, v)
    sch.bind(bx, "blockIdx.x")
    sch.bind(ty, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")
    sch.unroll(v)
    yl = sch.cache_write(norm, 0, "local")
    sch.reverse_compute_at(yl, r)
    sch.vectorize(sch.get_loops(yl)[-1])
    root = sch.get_sblock("root")
    names = [sch.get(b).name_hint for b in sch.get_child_blocks(root)]
    for name in reversed(names[:names.index("norm")]):
        blk = sch.get_sblock(name)
        sch.compute_at(blk, ty)
        for w, region in enumerate(sch.get(blk).writes):
            sch.set_scope(blk, w, stats if len(region.source.shape) == 1 else "local")
        loops = sch.get_loops(blk)[2:]
        if len(loops) == 1:  # a reduction over the row
            kr, kt = sch.split(loops[0], [None, lanes])
            sch.reorder(kt, kr)
            sch.bind(kt, "threadIdx.x")
        else:  # a per-lane pass (online softmax, Welford): the lane loop is the thread
            sch.bind(loops[0], "threadIdx.x")
            sch.unroll(loops[1])  # Welford's 1 / (k + 1) become constants
    if stage:
        xs = sch.cache_read(sch.get_sblock(names[0]), 0, stage)
        sch.compute_at(xs, bx)  # the block's rows, loaded by all its threads together
        fused = sch.fuse(*sch.get_loops(xs)[1:])
        _, y, t, vv = sch.split(fused, [None, rows, lanes, vector])
        sch.bind(y, "threadIdx.y")
        sch.bind(t, "threadIdx.x")
        sch.vectorize(vv)
    return sch


def dlight(mod):
    from tvm.s_tir import dlight as dl

    with helpers.env.make_target():
        return dl.ApplyDefaultSchedule(dl.gpu.GeneralReduction())(mod)
