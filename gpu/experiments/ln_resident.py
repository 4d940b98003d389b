"""Layer norm's long rows on the H200, the plan after `ln_scale_shift.py`: there, 09's layer norm reads
78-79% of the copy at rows of 32,768 and the same kernel without its scale and shift 89-91%, on 2^26 and
2^28 values alike (so not the last wave's idle SMs). Every block of 09's plan loads all of W and B (128 KiB
at 32k, twice the row's bytes) from L2 after its statistics, while its 64 KiB of staged row waits; L1
cannot keep them beside three staged rows.

`resident`: a block an SM stays for all its rows (rows bx, bx + blocks, ...). Each of its 512 (or 1024)
threads loads its columns of W and B (64 or 32 at 32k) into registers once. The rows stream through a ring of `stages` row buffers in
shared memory with `cp.async` (16 bytes a thread at a time, committed as one group a row), `stages - 1`
rows ahead of the one being normalized. A thread reads back only the columns it copied itself, so the
ring needs no barrier; the row's sum and then its squared deviations from the mean (two passes over the
row in shared memory, NumPy's formula) are the block's only reductions. TensorIR with explicit threads
(TIRx), as 11's kernels: TVM's `software_pipeline` annotations cannot pipeline 09's schedule across its
allreduces (InjectSoftwarePipeline drops their result buffers: "variables (red_result, red_result) are
used, but are not passed in as API arguments").

Each variant is checked against the float64 reference, then timed in 7 rounds alternating with the float4
copy of the same bytes (2^26 fp16 values, 256 MiB moved). `profile`: 09's kernel and the resident one at
32k under Nsight Compute.

    python gpu/experiments/ln_resident.py [profile]
"""

import sys

from tvm.script import tirx as T

import helpers
from helpers import reduction_tables
from ln_scale_shift import launch, profile, time_variants

SHAPES = [(2048, 32768), (4096, 16384), (8192, 8192)]


@T.macro
def issue_row(ring, X, slot, row, tid, threads, vecs):
    # this thread's 16-byte pieces of X's `row` into ring[slot], one cp.async each, committed as one group
    for v in T.unroll(vecs):
        T.evaluate(T.ptx["cp.async.cg.shared.global"](ring.ptr_to([slot, v * threads * 8 + tid * 8]),
                                                       X.ptr_to([row, v * threads * 8 + tid * 8]), 16))


@T.macro
def start(w, b, W, B, ring, X, bx, blocks, rows, stages, tid, threads, vecs):
    # the thread's columns of W and B into registers (v * threads * 8 + tid * 8 + e, e < 8), then the
    # block's first stages - 1 rows in flight, a commit group each
    for v in T.unroll(vecs):
        w[T.Ramp(v * 8, 1, 8)] = W[T.Ramp(v * threads * 8 + tid * 8, 1, 8)]
        b[T.Ramp(v * 8, 1, 8)] = B[T.Ramp(v * threads * 8 + tid * 8, 1, 8)]
    for s in T.unroll(stages - 1):
        if s < rows:
            issue_row(ring, X, s, bx + s * blocks, tid, threads, vecs)
        T.evaluate(T.ptx["cp.async.commit_group"]())


@T.macro
def next_row(ring, X, bx, blocks, rows, k, stages, tid, threads, vecs):
    # row k + stages - 1 into the slot row k - 1 used; then wait for this thread's part of row k
    if k + stages - 1 < rows:
        issue_row(ring, X, (k + stages - 1) % stages, bx + (k + stages - 1) * blocks, tid, threads, vecs)
    T.evaluate(T.ptx["cp.async.commit_group"]())
    T.evaluate(T.ptx["cp.async.wait_group"](stages - 1))


@T.macro
def normalize_row(Y, ring, slot, row, x, y, w, b, mean, rstd, tid, threads, vecs):
    # Y's `row` from this thread's part of ring[slot]: (x - mean) * rstd * w + b, 16 bytes a store
    for v in T.unroll(vecs):
        x[T.Ramp(0, 1, 8)] = ring[slot, T.Ramp(v * threads * 8 + tid * 8, 1, 8)]
        for e in T.unroll(8):
            y[e] = T.Cast("float16", (T.Cast("float32", x[e]) - mean) * rstd * T.Cast("float32", w[v * 8 + e])
                          + T.Cast("float32", b[v * 8 + e]))
        Y[row, T.Ramp(v * threads * 8 + tid * 8, 1, 8)] = y[T.Ramp(0, 1, 8)]


@T.macro
def block_sums(tot, acc, first, x, red, ring, k, stages, tid, threads, vecs, per, warps):
    # tot[0..2]: the sums over the block's threads of their means, squared means and M2s of their `per`
    # values of ring[k % stages] (each thread's in one pass: sums of x - x0 and its square, x0 its first
    # value), through red[k % 2], which alternates with the row so that one barrier guards it
    x[T.Ramp(0, 1, 8)] = ring[k % stages, T.Ramp(tid * 8, 1, 8)]
    first[0] = T.Cast("float32", x[0])  # the shift: the thread's first value
    acc[0] = T.float32(0)
    acc[2] = T.float32(0)
    for v in T.unroll(vecs):  # one pass: the sum and the sum of squares of x - first
        x[T.Ramp(0, 1, 8)] = ring[k % stages, T.Ramp(v * threads * 8 + tid * 8, 1, 8)]
        for e in T.unroll(8):
            acc[0] = acc[0] + (T.Cast("float32", x[e]) - first[0])
            acc[2] = acc[2] + (T.Cast("float32", x[e]) - first[0]) * (T.Cast("float32", x[e]) - first[0])
    acc[2] = acc[2] - acc[0] * acc[0] * T.float32(1 / per)  # the thread's M2
    acc[0] = first[0] + acc[0] * T.float32(1 / per)  # the thread's mean
    acc[1] = acc[0] * acc[0]
    for q in T.unroll(3):
        acc[q] = T.cuda.warp_sum(acc[q], 32)
        if tid % 32 == 0:
            red[k % 2, q, tid // 32] = acc[q]
    T.cuda.cta_sync()
    for q in T.unroll(3):
        tot[q] = T.float32(0)
        for i in T.unroll(warps):
            tot[q] = tot[q] + red[k % 2, q, i]


def layer_norm_resident(M, N, blocks, stages, threads=512, eps=1e-5):
    """Layer norm of M rows of N fp16 values by `blocks` resident blocks (W and B in registers, rows in a
    ring of `stages` shared buffers filled by cp.async); the row's sum, then its squared deviations, each
    summed over the block (two barriers a row)."""
    helpers.require_divides(N, threads * 8, "threads x 8")
    per, vecs, warps = N // threads, N // threads // 8, threads // 32

    @T.prim_func
    def main(X: T.Buffer((M, N), "float16"), W: T.Buffer((N,), "float16"), B: T.Buffer((N,), "float16"),
             Y: T.Buffer((M, N), "float16")):
        T.func_attr({"tirx.noalias": True})
        with T.attr(0, "tirx.device_entry", True):
            bx = T.cta_id([blocks])
            tid = T.thread_id([threads])
            ring = T.alloc_buffer((stages, N), "float16", scope="shared.dyn", align=128)
            red = T.alloc_buffer((2, warps), "float32", scope="shared")
            w, b = [T.alloc_local((per,), "float16") for _ in range(2)]
            x, y = [T.alloc_local((8,), "float16") for _ in range(2)]
            acc, tot = [T.alloc_local((2,), "float32") for _ in range(2)]
            rows = T.meta_var((M - bx + blocks - 1) // blocks)  # this block's rows: bx, bx + blocks, ...
            start(w, b, W, B, ring, X, bx, blocks, rows, stages, tid, threads, vecs)
            for k in T.serial(rows):
                next_row(ring, X, bx, blocks, rows, k, stages, tid, threads, vecs)
                for p in T.unroll(2):  # p = 0: the row's sum; p = 1: its squared deviations from the mean
                    acc[p] = T.float32(0)
                    for v in T.unroll(vecs):
                        x[T.Ramp(0, 1, 8)] = ring[k % stages, T.Ramp(v * threads * 8 + tid * 8, 1, 8)]
                        for e in T.unroll(8):
                            if p == 0:
                                acc[0] = acc[0] + T.Cast("float32", x[e])
                            else:
                                acc[1] = acc[1] + (T.Cast("float32", x[e]) - tot[0] * T.float32(1 / N)) * (
                                    T.Cast("float32", x[e]) - tot[0] * T.float32(1 / N))
                    acc[p] = T.cuda.warp_sum(acc[p], 32)
                    if tid % 32 == 0:
                        red[p, tid // 32] = acc[p]
                    T.cuda.cta_sync()
                    tot[p] = T.float32(0)
                    for i in T.unroll(warps):
                        tot[p] = tot[p] + red[p, i]
                normalize_row(Y, ring, k % stages, bx + k * blocks, x, y, w, b, tot[0] * T.float32(1 / N),
                              T.rsqrt(tot[1] * T.float32(1 / N) + T.float32(eps)), tid, threads, vecs)
    return main


def layer_norm_one_sync(M, N, blocks, stages, threads=512, eps=1e-5):
    """`layer_norm_resident` with one barrier a row: each thread first takes the mean and M2 of its own
    `per` values (one pass: sums of x - x0 and its square, x0 the thread's first value; no barrier),
    then the block sums the threads' means, squared means and M2s at once (Chan: M2 = sum of M2s + per *
    (sum of squared means - threads * mean^2)), into a slot of `red` that alternates with the row, so that
    no second barrier guards it. Its frame (arguments, buffers, ring) is `layer_norm_resident`'s: two
    variants of a study, side by side as they were timed."""
    helpers.require_divides(N, threads * 8, "threads x 8")
    per, vecs, warps = N // threads, N // threads // 8, threads // 32

    @T.prim_func
    def main(X: T.Buffer((M, N), "float16"), W: T.Buffer((N,), "float16"), B: T.Buffer((N,), "float16"),
             Y: T.Buffer((M, N), "float16")):
        T.func_attr({"tirx.noalias": True})
        with T.attr(0, "tirx.device_entry", True):
            bx = T.cta_id([blocks])
            tid = T.thread_id([threads])
            ring = T.alloc_buffer((stages, N), "float16", scope="shared.dyn", align=128)
            red = T.alloc_buffer((2, 3, warps), "float32", scope="shared")
            w, b = [T.alloc_local((per,), "float16") for _ in range(2)]
            x, y = [T.alloc_local((8,), "float16") for _ in range(2)]
            acc, tot = [T.alloc_local((3,), "float32") for _ in range(2)]
            first = T.alloc_local((1,), "float32")
            rows = T.meta_var((M - bx + blocks - 1) // blocks)
            start(w, b, W, B, ring, X, bx, blocks, rows, stages, tid, threads, vecs)
            for k in T.serial(rows):
                next_row(ring, X, bx, blocks, rows, k, stages, tid, threads, vecs)
                block_sums(tot, acc, first, x, red, ring, k, stages, tid, threads, vecs, per, warps)
                normalize_row(Y, ring, k % stages, bx + k * blocks, x, y, w, b, tot[0] * T.float32(1 / threads),
                              T.rsqrt((tot[2] + T.float32(per) * (tot[1] - tot[0] * tot[0] * T.float32(1 / threads)))
                                      * T.float32(1 / N) + T.float32(eps)), tid, threads, vecs)
    return main


def stages_for(n, spec):
    """Row buffers of n fp16 values that fit in this GPU's shared memory: at most 4."""
    return min(4, (spec.max_shared_memory_per_block - 2048) // (2 * n))


def variants(ns, m, n):
    """name -> (schedule or module, its TIR pipeline, inputs, float64 reference) at m x n, with a resident
    block on each of this GPU's SMs."""
    spec = helpers.local_gpu_spec()
    lanes = reduction_tables.plan(n, "float16")[0]
    xn, w, b = reduction_tables.layer_norm_inputs(m, n)
    ref = reduction_tables.layer_norm_ref(xn, w, b)
    sch = ns["one_kernel"](ns["layer_norm"](m, n, lanes), lanes, 1, 8)
    sch = ns["scale_shift_in_registers"](ns["row_in_shared"](sch, lanes, 1, 8), 8)
    out = {"ln (09's)": (sch, "default", [xn, w, b], ref)}
    top = stages_for(n, spec)
    for stages in sorted({2, top}):
        out[f"resident, {stages} stages"] = (layer_norm_resident(m, n, spec.sm_count, stages), "tirx", [xn, w, b], ref)
        out[f"one barrier, {stages} stages"] = (layer_norm_one_sync(m, n, spec.sm_count, stages), "tirx", [xn, w, b], ref)
    return out


if __name__ == "__main__":
    if sys.argv[1:2] == ["profile"]:
        sys.exit(profile(__file__, ["resident, 2 stages", "one barrier, 2 stages", "one barrier, 3 stages"]))
    elif sys.argv[1:2] == ["launch"]:
        launch(sys.argv[2], variants)
    else:
        time_variants(variants, SHAPES)
