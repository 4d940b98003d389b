"""Layer norm's long rows: 09's kernel reads 89.8% of the copy on rows of 32,768, its softmax 96-98%.
The kernels differ after the statistics: layer norm's last pass loads the scale and shift (16 bytes of
each a step, from L2) in a loop of 8 steps that nvcc keeps rolled (32 registers), so each step waits
for its loads. Softmax's last pass loads nothing. Variants: that loop unrolled by 2, 4 or all 8 (the
loads of several steps in flight), at rows of 8k, 16k and 32k (2^26 fp16 values, 256 MiB moved).
(Found, 2026-11-28: 0.3-0.8 points at best, unroll 2; the rolled loop is not what holds the long rows.)
Each is checked against the float64 reference, then timed in 7 rounds alternating with the float4
copy of the same bytes (well beyond L2, back to back); median ms and % of that copy.

    python gpu/experiments/ln_unroll.py
"""

import numpy as np

import helpers
from helpers import bench, kernels, reduction_tables
from ln_long_rows import lesson, report_against_copy

SHAPES = [(2048, 32768), (4096, 16384), (8192, 8192)]


def main():
    ns = lesson()
    dev, target = helpers.device(), helpers.make_target()
    spec = helpers.local_gpu_spec()

    def variant(m, n, unroll):
        lanes, rows, vector = reduction_tables.plan(n, "float16")
        sch = ns["one_kernel"](ns["layer_norm"](m, n, lanes), lanes, rows, vector)
        sch = ns["scale_shift_in_registers"](ns["row_in_shared"](sch, lanes, rows, vector), vector)
        if unroll:  # the loop over the thread's vectors, around the scale's and shift's loads
            loop = sch.get_loops(sch.get_sblock("W_local"))[-2]
            if unroll < sch.get(loop).extent:
                loop = sch.split(loop, [None, unroll])[1]
            sch.unroll(loop)
        return sch

    print(f"{spec.name}: layer norm, 2^26 fp16 values, 7 rounds against the float4 copy of the same bytes")
    for m, n in SHAPES:
        xn, w, b = reduction_tables.layer_norm_inputs(m, n)
        ref = reduction_tables.layer_norm_ref(xn, w, b)
        runs = {}
        for unroll in (0, 2, 4, 8):
            sch = variant(m, n, unroll)
            regs = kernels.ptxas_report(sch, target)[0].registers
            ex = kernels.build(sch, target)
            args = bench._launch_once(ex, dev, [xn, w, b, np.empty_like(xn)], -1)
            err = bench.relative_error(args[-1].numpy(), ref)
            name = f"{m}x{n} unroll {unroll}"
            print(f"  {name}: {regs} registers, rel. error {err:.1e}", flush=True)
            if err < 2e-3:
                runs[name] = (ex, args)
        report_against_copy(runs, xn.nbytes, dev, target, 24)


if __name__ == "__main__":
    main()
