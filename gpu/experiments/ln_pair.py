"""Layer norm's rows of 32,768 by two SMs each (a cluster of two CTAs), on the plan that reached 93% of
the copy at rows of 16,384 on the H200 (`ln_resident.py`'s `layer_norm_one_sync`: a resident block an SM,
its columns of W and B in registers, rows streamed through a ring of shared buffers by cp.async, one
barrier a row). At 32k that plan reached 83%: a thread holds 64 columns of W and B (128 registers), the
ring's buffers are 64 KiB, and one block of 512 threads is all an SM runs.

`pair`: each CTA of a cluster of two takes one half of every row its cluster normalizes, so each SM does the
16k kernel's work: X and Y are seen as (2M, N / 2) (and W, B as their halves), and the CTA with linear index
bx walks half-rows bx, bx + blocks, ... (cluster c's two CTAs, 2c and 2c + 1, take row c's two halves).
After the block's sums (the threads' means, squared means and M2s, as `layer_norm_one_sync`), threads 0-2
write the block's three sums into its partner's shared memory (distributed shared memory, `mapa` then
`st.shared::cluster`), and the cluster's barrier (`barrier.cluster.arrive` / `wait`, release and acquire)
makes them visible: then each CTA combines both halves (Chan's formula over 2 x 512 threads). The sums'
slots alternate with the row, so that one cluster barrier and one block barrier a row are all. CUDA guide:
distributed shared memory, https://docs.nvidia.com/cuda/cuda-c-programming-guide/#distributed-shared-memory

Checked against the float64 reference, then timed in 7 rounds against the float4 copy of the same bytes
(2^26 fp16 values), beside 09's kernel and `layer_norm_one_sync`. `profile`: the one-barrier kernel and the
pair at 32k under Nsight Compute.

    python gpu/experiments/ln_pair.py [profile]
"""

import sys

from tvm.script import tirx as T

import helpers
from helpers import reduction_tables
from ln_resident import block_sums, layer_norm_one_sync, next_row, normalize_row, stages_for, start
from ln_scale_shift import launch, profile, time_variants

SHAPES = [(2048, 32768), (4096, 16384)]


def layer_norm_pair(M, N, blocks, stages, threads=512, eps=1e-5):
    """Layer norm of M rows of N fp16 values, each row by a cluster of two resident CTAs (`blocks` in all,
    even), each CTA half of every row its cluster takes. Its frame (arguments, buffers, ring) is
    `layer_norm_one_sync`'s over half-rows, repeated so that the two kernels read side by side as timed."""
    half = N // 2
    helpers.require_divides(half, threads * 8, "threads x 8")
    helpers.require_divides(blocks, 2, "2 (a cluster of two CTAs)")
    per, vecs, warps = half // threads, half // threads // 8, threads // 32

    @T.prim_func
    def main(X0: T.Buffer((M, N), "float16"), W0: T.Buffer((N,), "float16"), B0: T.Buffer((N,), "float16"),
             Y0: T.Buffer((M, N), "float16")):
        T.func_attr({"tirx.noalias": True})
        with T.attr(0, "tirx.device_entry", True):
            X, Y = [T.decl_buffer((2 * M, half), "float16", data=a.data) for a in (X0, Y0)]  # half-rows
            bx = T.cta_id([blocks])
            rank = T.cta_id_in_cluster([2])
            W, B = [T.decl_buffer((half,), "float16", data=a.data, elem_offset=rank * half) for a in (W0, B0)]
            tid = T.thread_id([threads])
            ring = T.alloc_buffer((stages, half), "float16", scope="shared.dyn", align=128)
            red = T.alloc_buffer((2, 3, warps), "float32", scope="shared")
            theirs = T.alloc_buffer((2, 3), "float32", scope="shared")  # the partner's three sums
            w, b = [T.alloc_local((per,), "float16") for _ in range(2)]
            x, y = [T.alloc_local((8,), "float16") for _ in range(2)]
            acc, tot = [T.alloc_local((3,), "float32") for _ in range(2)]
            first = T.alloc_local((1,), "float32")
            there = T.alloc_local((1,), "uint32")
            rows = T.meta_var((2 * M - bx + blocks - 1) // blocks)
            start(w, b, W, B, ring, X, bx, blocks, rows, stages, tid, threads, vecs)
            T.evaluate(T.ptx.mapa.shared__cluster.u32(there[0], T.cuda.cvta_generic_to_shared(theirs.ptr_to([0, 0])),
                                                      T.uint32(1 - rank)))
            T.cuda.cluster_sync()  # the partner runs before its shared memory is written
            for k in T.serial(rows):
                next_row(ring, X, bx, blocks, rows, k, stages, tid, threads, vecs)
                block_sums(tot, acc, first, x, red, ring, k, stages, tid, threads, vecs, per, warps)  # this half
                if tid < 3:  # this half's sums into the partner's slot k % 2
                    T.evaluate(T.ptx.st.shared__cluster.f32(there[0] + T.uint32((k % 2 * 3 + tid) * 4), tot[tid]))
                T.cuda.cluster_sync()
                for q in T.unroll(3):
                    tot[q] = tot[q] + theirs[k % 2, q]
                normalize_row(Y, ring, k % stages, bx + k * blocks, x, y, w, b, tot[0] * T.float32(0.5 / threads),
                              T.rsqrt((tot[2] + T.float32(per) * (tot[1] - tot[0] * tot[0] * T.float32(0.5 / threads)))
                                      * T.float32(1 / N) + T.float32(eps)), tid, threads, vecs)
    return main


def variants(ns, m, n):
    """name -> (kernel, pipeline, inputs, float64 reference) at m x n: 09's kernel, `layer_norm_one_sync`
    with a block an SM, and the pair with two CTAs a cluster, one an SM, at 2 stages and at as many as fit (up to 4)."""
    spec = helpers.local_gpu_spec()
    lanes = reduction_tables.plan(n, "float16")[0]
    xn, w, b = reduction_tables.layer_norm_inputs(m, n)
    ref = reduction_tables.layer_norm_ref(xn, w, b)
    sch = ns["one_kernel"](ns["layer_norm"](m, n, lanes), lanes, 1, 8)
    sch = ns["scale_shift_in_registers"](ns["row_in_shared"](sch, lanes, 1, 8), 8)
    out = {"ln (09's)": (sch, "default", [xn, w, b], ref),
           "one barrier, 2 stages": (layer_norm_one_sync(m, n, spec.sm_count, 2), "tirx", [xn, w, b], ref)}
    for stages in sorted({2, stages_for(n // 2, spec)}):
        out[f"pair, {stages} stages"] = (layer_norm_pair(m, n, spec.sm_count // 2 * 2, stages), "tirx", [xn, w, b], ref)
    return out


if __name__ == "__main__":
    if sys.argv[1:2] == ["profile"]:
        sys.exit(profile(__file__, ["one barrier, 2 stages", "pair, 2 stages"]))
    elif sys.argv[1:2] == ["launch"]:
        launch(sys.argv[2], variants)
    else:
        time_variants(variants, SHAPES)
