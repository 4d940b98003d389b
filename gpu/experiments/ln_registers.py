"""Layer norm's and softmax's long rows on the H200, with the row in registers and W and B left to L1.

`ln_wb_l1.py` found what holds 09's layer norm at 79% of the copy there: every row loads all of W and B
(128 KiB at 32k) from L2, because three staged rows (192 KiB of shared memory an SM) leave L1 too little
to keep them; with W and B short enough to be loaded once a row, the same kernel reads 88%. The resident
blocks of `ln_resident.py` load W and B once an SM, into registers, and then serialize their rows (83%).

Here it is the row that goes to registers, not W and B: the register file (256 KiB an SM) is separate
from L1 and shared memory (256 KiB together). A block of `threads` threads takes one row; each thread
loads its N / threads values with 16-byte loads (all issued before any is used) and keeps them packed as
fp16 (32 registers for 64 values), takes its own mean and M2 in one pass (sums of x - x[0] and of its
square), and the block merges the threads' (mean, squared mean, M2) in one barrier (Chan's formula, as
`ln_resident.layer_norm_one_sync`). Then each thread loads its columns of W and B a step at a time and
stores its part of Y. Shared memory holds only the warps' partial sums, so L1 keeps nearly all of its
256 KiB for W and B while `blocks` rows an SM are in flight: `__launch_bounds__(threads, blocks)` bounds
the registers (`mma_fp16.min_blocks_pipeline`). `softmax_registers` is 09's softmax on the same plan.

What it found (`results/ln_registers*.nvidia-h200.txt`, 2026-11-29, % of the float4 copy of the same
bytes): at 32k, 512 threads and 2 blocks an SM read 90.7% (09's 79.6%), 94.9% on 1 GiB (`tail`: 7.8 waves
of 264 rows leave a partial one at 256 MiB); at 16k 95.8% (09's 90.1%); at 8k, 256 threads and 4 blocks
95.1% (09's 95.2%). Under Nsight Compute at 32k the L1 hit rate goes from 0 to 44% (loads of X and W and B
and stores of Y, so most of W and B hit) and DRAM from 64 to 76% of peak. Loading X past L1
(`L1::no_allocate`) is a point slower, not faster. The softmax on the same plan: 94.4% at 32k (09's
85.8%), 93.8% at 16k with 3 blocks (92.3%), 97.8% at 8k (96.2%). Which (threads, blocks) wins is not
monotone (16k: 2 blocks for the layer norm, 3 for the softmax; the others 81-83%) and is not explained here.

Each variant is checked against the float64 reference, then timed in 7 rounds against the float4 copy of
the same bytes (2^26 fp16 values, 256 MiB moved: well beyond L2). `softmax`: the softmax variants. `tail`:
the layer norms at 32k on 4 times the rows. `short`: both kernels at rows of 1,024 (128 threads with one
16-byte load each, or 64 with two), where the H200's record of 09 read 78-82% (2026-11-29: 64 threads and 32
blocks an SM read 92.0% and 98.6%, `results/ln_registers.short.nvidia-h200.txt`; its "09's" kernels were
09's plan of then, a block of 128 threads a row; 09 now gives these rows a warp, and so do they). `profile`:
09's layer norm and the register rows at 32k under Nsight Compute. `build` (no GPU): registers and spills
of each variant, as ptxas reports them for sm_90a.

    python gpu/experiments/ln_registers.py [softmax | tail | short | profile | build]
"""

import sys

from tvm.script import tirx as T

import helpers
from helpers import reduction_tables
from ln_resident import layer_norm_one_sync
from ln_scale_shift import launch, layer_norm_schedule, profile, staged, time_variants
from mma_fp16 import min_blocks_pipeline

SHAPES = [(2048, 32768), (4096, 16384), (8192, 8192)]


def layer_norm_registers(M, N, threads, x_past_l1=True, eps=1e-5):
    """Layer norm of M rows of N fp16 values, a block of `threads` a row, the row in registers (N / threads
    values a thread, 16 bytes a load, loaded past L1 when `x_past_l1`), its statistics merged by the block
    in one barrier, W and B loaded at the end through L1."""
    helpers.require_divides(N, threads * 8, "threads x 8")
    per, vecs, warps = N // threads, N // threads // 8, threads // 32
    load = "ld.global.L1::no_allocate.v4.u32" if x_past_l1 else "ld.global.v4.u32"
    wb_load = "ld.global.L1::evict_last.v4.u32"  # W and B: a step at a time (not all hoisted ahead), kept in L1

    @T.prim_func
    def main(X: T.Buffer((M, N), "float16"), W: T.Buffer((N,), "float16"), B: T.Buffer((N,), "float16"),
             Y: T.Buffer((M, N), "float16")):
        T.func_attr({"tirx.noalias": True})
        with T.attr(0, "tirx.device_entry", True):
            row = T.cta_id([M])
            tid = T.thread_id([threads])
            red = T.alloc_buffer((3, warps), "float32", scope="shared")
            words = T.alloc_local((per // 2,), "uint32")  # the thread's part of the row, as loaded
            x = T.decl_buffer((per,), "float16", data=words.data, scope="local")  # ... and as values
            w_words, b_words = [T.alloc_local((4,), "uint32") for _ in range(2)]
            w = T.decl_buffer((8,), "float16", data=w_words.data, scope="local")
            b = T.decl_buffer((8,), "float16", data=b_words.data, scope="local")
            y = T.alloc_local((8,), "float16")
            acc, tot = [T.alloc_local((3,), "float32") for _ in range(2)]
            for v in T.unroll(vecs):  # every load issued before any value is used
                T.ptx[load](words[v * 4], words[v * 4 + 1], words[v * 4 + 2], words[v * 4 + 3],
                            X.ptr_to([row, v * threads * 8 + tid * 8]))
            acc[0] = T.float32(0)
            acc[2] = T.float32(0)
            for i in T.unroll(per):  # one pass: the sums of d = x - x[0] and of d * d (shifted, so exact enough)
                d = T.meta_var(T.Cast("float32", x[i]) - T.Cast("float32", x[0]))
                acc[0] = acc[0] + d
                acc[2] = acc[2] + d * d
            acc[2] = acc[2] - acc[0] * acc[0] * T.float32(1 / per)  # the thread's M2
            acc[0] = T.Cast("float32", x[0]) + acc[0] * T.float32(1 / per)  # the thread's mean
            acc[1] = acc[0] * acc[0]
            for q in T.unroll(3):
                acc[q] = T.cuda.warp_sum(acc[q], 32)
                if tid % 32 == 0:
                    red[q, tid // 32] = acc[q]
            T.cuda.cta_sync()
            for q in T.unroll(3):  # each warp sums the warps' partials again: a value a lane, few registers
                tot[q] = T.cuda.warp_sum(T.if_then_else(tid % 32 < warps, red[q, tid % 32 % warps], T.float32(0)), 32)
            # Chan: the row's mean is the mean of the threads' means; its M2 adds their spread around it
            tot[0] = tot[0] * T.float32(1 / threads)
            tot[1] = T.rsqrt((tot[2] + T.float32(per) * (tot[1] - tot[0] * tot[0] * T.float32(threads)))
                             * T.float32(1 / N) + T.float32(eps))
            for v in T.unroll(vecs):
                T.ptx[wb_load](w_words[0], w_words[1], w_words[2], w_words[3], W.ptr_to([v * threads * 8 + tid * 8]))
                T.ptx[wb_load](b_words[0], b_words[1], b_words[2], b_words[3], B.ptr_to([v * threads * 8 + tid * 8]))
                for e in T.unroll(8):
                    y[e] = T.Cast("float16", (T.Cast("float32", x[v * 8 + e]) - tot[0]) * tot[1]
                                  * T.Cast("float32", w[e]) + T.Cast("float32", b[e]))
                Y[row, T.Ramp(v * threads * 8 + tid * 8, 1, 8)] = y[T.Ramp(0, 1, 8)]
    return main


def softmax_registers(M, N, threads):
    """09's softmax on the same plan: the row in registers, each thread's (max, sum of exp) merged by its warp
    and then, after one barrier, by every warp from the warps' partials (the online softmax's rescale)."""
    helpers.require_divides(N, threads * 8, "threads x 8")
    per, vecs, warps = N // threads, N // threads // 8, threads // 32

    @T.prim_func
    def main(X: T.Buffer((M, N), "float16"), Y: T.Buffer((M, N), "float16")):
        T.func_attr({"tirx.noalias": True})
        with T.attr(0, "tirx.device_entry", True):
            row = T.cta_id([M])
            tid = T.thread_id([threads])
            red = T.alloc_buffer((2, warps), "float32", scope="shared")
            words = T.alloc_local((per // 2,), "uint32")
            x = T.decl_buffer((per,), "float16", data=words.data, scope="local")
            y = T.alloc_local((8,), "float16")
            m, s = [T.alloc_local((1,), "float32") for _ in range(2)]
            mh = T.alloc_local((1,), "float16")
            for v in T.unroll(vecs):
                T.ptx["ld.global.v4.u32"](words[v * 4], words[v * 4 + 1], words[v * 4 + 2], words[v * 4 + 3],
                                          X.ptr_to([row, v * threads * 8 + tid * 8]))
            mh[0] = x[0]
            for i in T.unroll(1, per):  # in fp16, exact: the values are not converted twice
                mh[0] = T.max(mh[0], x[i])
            m[0] = T.Cast("float32", mh[0])
            s[0] = T.float32(0)
            for i in T.unroll(per):
                s[0] = s[0] + T.exp(T.Cast("float32", x[i]) - m[0])
            s[0] = s[0] * T.exp(m[0] - T.cuda.warp_max(m[0], 32))  # the thread's sum, rescaled to its warp's max
            m[0] = T.cuda.warp_max(m[0], 32)
            s[0] = T.cuda.warp_sum(s[0], 32)
            if tid % 32 == 0:
                red[0, tid // 32] = m[0]
                red[1, tid // 32] = s[0]
            T.cuda.cta_sync()
            m[0] = T.cuda.warp_max(T.if_then_else(tid % 32 < warps, red[0, tid % 32 % warps], red[0, 0]), 32)
            s[0] = T.cuda.warp_sum(T.if_then_else(tid % 32 < warps, red[1, tid % 32 % warps]
                                                  * T.exp(red[0, tid % 32 % warps] - m[0]), T.float32(0)), 32)
            s[0] = T.float32(1) / s[0]
            for v in T.unroll(vecs):
                for e in T.unroll(8):
                    y[e] = T.Cast("float16", T.exp(T.Cast("float32", x[v * 8 + e]) - m[0]) * s[0])
                Y[row, T.Ramp(v * threads * 8 + tid * 8, 1, 8)] = y[T.Ramp(0, 1, 8)]
    return main


#: (threads a row, blocks an SM, X loaded past L1) of each register plan timed, by row length
LN_PLANS = {32768: [(512, 2, True), (512, 2, False), (256, 3, True), (512, 1, True)],
            16384: [(512, 3, True), (512, 3, False), (512, 2, False)],
            8192: [(512, 4, True), (512, 4, False), (256, 4, False)],
            1024: [(128, 16, False), (64, 32, False)]}
SOFTMAX_PLANS = {32768: [(512, 2)], 16384: [(512, 3), (512, 2)], 8192: [(512, 4), (256, 4)], 1024: [(128, 16), (64, 32)]}


def plan_name(threads, blocks, past_l1=False):
    """'registers[, X past L1][, T threads], B blocks' (512 threads unnamed), as the results name them."""
    return (f"registers, {'X past L1, ' if past_l1 else ''}{f'{threads} threads, ' if threads != 512 else ''}"
            f"{blocks} block{'s' if blocks > 1 else ''}")


def bounded(blocks):
    """The TIRx pipeline with `__launch_bounds__(threads, blocks)`; one block: TIRx's own."""
    return min_blocks_pipeline(blocks, "tirx") if blocks > 1 else "tirx"


def softmax_variants(ns, m, n):
    """name -> (kernel, TIR pipeline, inputs, float64 reference): 09's softmax (staged) and on the register plans."""
    lanes, rows, _ = reduction_tables.plan(n, "float16")
    x = reduction_tables.logits(m, n)
    ref = reduction_tables.softmax_ref(x)
    return {"softmax (09's)": (staged(ns, ns["online_softmax"](m, n, lanes), lanes, rows), "default", [x], ref),
            **{f"softmax, {plan_name(t, blocks)}": (softmax_registers(m, n, t), bounded(blocks), [x], ref)
               for t, blocks in SOFTMAX_PLANS[n]}}


def variants(ns, m, n):
    """name -> (kernel, TIR pipeline, inputs, float64 reference) at m x n: 09's layer norm, `ln_resident`'s
    best where its 512 threads fit the row, and the register plans."""
    lanes, rows, _ = reduction_tables.plan(n, "float16")
    xn, w, b = reduction_tables.layer_norm_inputs(m, n)
    ref = reduction_tables.layer_norm_ref(xn, w, b)
    out = {"ln (09's)": (layer_norm_schedule(ns, ns["layer_norm"](m, n, lanes), lanes, rows), "default", [xn, w, b],
                         ref)}
    if n % (512 * 8) == 0:
        sm_count = helpers.local_gpu_spec().sm_count if helpers.gpu_available() else 132  # `build` runs without one
        out["one barrier, 2 stages"] = (layer_norm_one_sync(m, n, sm_count, 2), "tirx", [xn, w, b], ref)
    for t, blocks, past_l1 in LN_PLANS[n]:
        out[plan_name(t, blocks, past_l1)] = (layer_norm_registers(m, n, t, x_past_l1=past_l1), bounded(blocks),
                                              [xn, w, b], ref)
    return out


def short_variants(ns, m, n):
    """At rows of 1,024 (where the H200's record of 09 reads 77.5% for the layer norm, 81.8% for the softmax):
    09's kernels and both on the register plan with 128 threads (one 16-byte load each) and 64 (two)."""
    return {**variants(ns, m, n), **softmax_variants(ns, m, n)}


def build_report(m=2048, n=32768):
    """(No GPU needed.) Registers, spills and shared memory of each variant, as ptxas reports them for sm_90a."""
    from ln_long_rows import lesson

    for name, (kernel, pipeline, _, _) in variants(lesson(), m, n).items():
        ex = helpers.build(kernel, "sm_90a", pipeline)
        for r in helpers.ptxas_report(ex, "sm_90a"):
            print(f"{m}x{n} {name}: {r.registers} registers, {r.spill_stores} bytes spilled, {r.shared_bytes} bytes shared")


if __name__ == "__main__":
    if sys.argv[1:2] == ["profile"]:
        sys.exit(profile(__file__, ["ln (09's)", "registers, X past L1, 2 blocks", "registers, 2 blocks"]))
    elif sys.argv[1:2] == ["launch"]:
        launch(sys.argv[2], variants)
    elif sys.argv[1:2] == ["softmax"]:
        time_variants(softmax_variants, SHAPES)
    elif sys.argv[1:2] == ["short"]:
        time_variants(short_variants, [(65536, 1024)])
    elif sys.argv[1:2] == ["tail"]:
        time_variants(variants, SHAPES[:1], 4)
    elif sys.argv[1:2] == ["build"]:
        for m, n in SHAPES:
            build_report(m, n)
    else:
        time_variants(variants, SHAPES)
