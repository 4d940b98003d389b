"""Layer norm's long rows: 09's kernel reads 89.8% of the copy on rows of 32,768 fp16 (its record), its
softmax 96-98% (`ln_long_rows.py`, `ln_unroll.py`). What the softmax does not have is Welford's chain:
each of a row's 512 threads updates one running mean and M2, 64 dependent updates (two FMAs each, the
next waiting for the last) between the row's arrival in shared memory and the block's reduction.

`two chains`: each thread keeps two Welford states, its even and its odd elements (the same elements as
before, in the same order of loads), so the two chains' updates interleave and each is 32 long; the
row's statistics then merge 2 x 512 partial states by Chan's formula, as the lanes' were merged before.
The schedule is 09's (`fastest_layer_norm`'s steps): the chain axis is a spatial loop inside each
thread's pass. Checked against the float64 reference, timed in 7 rounds alternating with the float4
copy of the same bytes (2^26 fp16 values, 256 MiB moved: well beyond L2).
(Found, c15ef6b on an H200, `results/ln_two_chains.txt`: slower, 79.0 -> 74.8% of the copy at 32k and
89.7 -> 86.4% at 16k; the chain is not what holds the long rows. Not taken.)

    python gpu/experiments/ln_two_chains.py
"""

import numpy as np
from tvm.script import ir as I
from tvm.script import tirx as T

import helpers
from helpers import bench, kernels, reduction_tables
from ln_long_rows import lesson, report_against_copy

SHAPES = [(2048, 32768), (4096, 16384)]


def layer_norm_chains(M, N, lanes, chains=2, dtype="float16", eps=1e-5):
    """09's `layer_norm` with `chains` Welford states a lane: lane t's element k (X[k * lanes + t]) goes to
    chain k % chains; the row's mean and M2 merge lanes x chains states (Chan: M2s plus the means' spread)."""
    helpers.require_divides(N, lanes * chains, "lanes x chains")
    steps = N // lanes // chains  # updates a chain
    parts = lanes * chains

    @I.ir_module
    class LayerNorm:
        @T.prim_func(s_tir=True)
        def main(X: T.Buffer((M, N), dtype), W: T.Buffer((N,), dtype), B: T.Buffer((N,), dtype),
                 Y: T.Buffer((M, N), dtype)):
            T.func_attr({"tirx.noalias": True})
            lane_mean = T.sblock_alloc_buffer((M, lanes, chains), "float32")
            lane_m2 = T.sblock_alloc_buffer((M, lanes, chains), "float32")
            mean = T.sblock_alloc_buffer((M,), "float32")
            m2 = T.sblock_alloc_buffer((M,), "float32")
            for i, t, k, c in T.grid(M, lanes, steps, chains):
                with T.sblock("welford"):
                    vi, vt, vk, vc = T.axis.remap("SSRS", [i, t, k, c])
                    with T.init():
                        lane_mean[vi, vt, vc] = T.float32(0)
                        lane_m2[vi, vt, vc] = T.float32(0)
                    delta = T.meta_var(T.Cast("float32", X[vi, (vk * chains + vc) * lanes + vt]) - lane_mean[vi, vt, vc])
                    lane_m2[vi, vt, vc] = lane_m2[vi, vt, vc] + delta * delta * (T.Cast("float32", vk) / T.Cast("float32", vk + 1))
                    lane_mean[vi, vt, vc] = lane_mean[vi, vt, vc] + delta * (T.float32(1) / T.Cast("float32", vk + 1))
            for i, t, c in T.grid(M, lanes, chains):
                with T.sblock("mean"):
                    vi, vt, vc = T.axis.remap("SRR", [i, t, c])
                    with T.init(): mean[vi] = T.float32(0)
                    mean[vi] = mean[vi] + lane_mean[vi, vt, vc] * T.float32(1 / parts)
            for i, t, c in T.grid(M, lanes, chains):
                with T.sblock("m2"):
                    vi, vt, vc = T.axis.remap("SRR", [i, t, c])
                    with T.init(): m2[vi] = T.float32(0)
                    spread = T.meta_var(lane_mean[vi, vt, vc] - mean[vi])
                    m2[vi] = m2[vi] + (lane_m2[vi, vt, vc] + T.float32(steps) * spread * spread)
            for i, j in T.grid(M, N):
                with T.sblock("norm"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    rstd = T.meta_var(T.rsqrt(m2[vi] * T.float32(1 / N) + T.float32(eps)))
                    Y[vi, vj] = T.Cast(dtype, (T.Cast("float32", X[vi, vj]) - mean[vi]) * rstd * T.Cast("float32", W[vj])
                                       + T.Cast("float32", B[vj]))
    return LayerNorm


def schedule(ns, mod, n):
    """09's fastest_layer_norm's steps on `mod` (the row staged: it fits at these lengths)."""
    lanes, rows, vector = reduction_tables.plan(n, "float16")
    sch = ns["one_kernel"](mod, lanes, rows, vector)
    return ns["scale_shift_in_registers"](ns["row_in_shared"](sch, lanes, rows, vector), vector)


def main():
    ns = lesson()
    dev, target = helpers.device(), helpers.make_target()
    spec = helpers.local_gpu_spec()
    print(f"{spec.name}: layer norm, 2^26 fp16 values, 7 rounds against the float4 copy of the same bytes")
    for m, n in SHAPES:
        lanes = reduction_tables.plan(n, "float16")[0]
        xn, w, b = reduction_tables.layer_norm_inputs(m, n)
        ref = reduction_tables.layer_norm_ref(xn, w, b)
        runs = {}
        for name, mod in [("one chain (09's)", ns["layer_norm"](m, n, lanes)),
                          ("two chains", layer_norm_chains(m, n, lanes, 2))]:
            sch = schedule(ns, mod, n)
            regs = kernels.ptxas_report(sch, target)[0].registers
            ex = kernels.build(sch, target)
            args = bench._launch_once(ex, dev, [xn, w, b, np.empty_like(xn)], -1)
            err = bench.relative_error(args[-1].numpy(), ref)
            print(f"  {m}x{n} {name}: {regs} registers, rel. error {err:.1e}", flush=True)
            if err < 2e-3:
                runs[f"{m}x{n} {name}"] = (ex, args)
        report_against_copy(runs, xn.nbytes, dev, target, 28)


if __name__ == "__main__":
    main()
