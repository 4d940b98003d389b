"""09's short rows on the H200: two or four 16-byte loads a thread, not one.

The H200's record of 09 (2026-11-29) reads under 90% of the copy at rows of 128, 256 and 1,024 fp16 values
and 95-96% at 512 and 2,048. `reduction_tables.plan` gives those three row lengths one 16-byte vector a
thread (128: 16 threads a row, 8 rows a block; 256: 32 and 4; 1,024: 128 and 1), and the two that read
96% two vectors a thread (512: 32 threads and 4 rows; 2,048: 128 threads and 1 row). A block of 128
threads then has 2 KiB of loads in flight where the others have 4 KiB, and at 16 blocks an SM that is
32 KiB an SM. Little's law at the H200's 4.8 TB/s and about 600 ns from DRAM asks for about 2.9 MB in
flight, 22 KiB an SM, before the barrier and the arithmetic that do not overlap the loads: the H100's
3.35 TB/s asks for less, and there 1,024 reads 95%.

Here 09's own schedule steps (`one_kernel`, `row_in_shared`, `scale_shift_in_registers`) run with the
threads a row halved and quartered (the rows a block doubled and quadrupled, 128 threads a block), so
each thread issues 2 or 4 loads, at rows of 128, 256 and 1,024 (2^26 fp16 values, 256 MiB moved: well
beyond L2). Each is checked against its float64 reference and timed in 7 rounds against the float4 copy
of the same bytes.

`unstaged`: 09's plan and 2 loads a thread without `row_in_shared` (X read twice, no staging barrier).

    python gpu/experiments/short_rows.py [unstaged]
"""

import sys

from helpers import reduction_tables
from ln_scale_shift import time_variants

ROW_LENGTHS = (128, 256, 1024)


def schedules(ns, m, n, lanes, rows, in_shared=True):
    """09's softmax and layer norm at m x n with `lanes` threads a row and `rows` rows a block, staged and
    vectorized as `fastest_softmax` and `fastest_layer_norm` do (or, `in_shared` false, not staged: X read
    twice, the second time from L1 or L2)."""
    def staged(module):
        sch = ns["one_kernel"](module, lanes, rows, 8)
        return ns["row_in_shared"](sch, lanes, rows, 8) if in_shared else sch
    return (staged(ns["online_softmax"](m, n, lanes)),
            ns["scale_shift_in_registers"](staged(ns["layer_norm"](m, n, lanes)), 8))


def variants(ns, m, n):
    """name -> (schedule, TIR pipeline, inputs, float64 reference): each kernel with 09's plan and with its
    threads a row divided by 2 and 4 (2 and 4 loads a thread)."""
    lanes, rows, _ = reduction_tables.plan(n, "float16")
    x = reduction_tables.logits(m, n)
    xn, w, b = reduction_tables.layer_norm_inputs(m, n)
    refs = reduction_tables.softmax_ref(x), reduction_tables.layer_norm_ref(xn, w, b)
    out = {}
    for loads in (1, 2, 4):
        t, r = lanes // loads, rows * loads
        softmax, ln = schedules(ns, m, n, t, r)
        tag = f"{t} threads x {r} rows, {loads} load{'s' if loads > 1 else ''}" + (" (09's)" if loads == 1 else "")
        out[f"softmax, {tag}"] = (softmax, "default", [x], refs[0])
        out[f"ln, {tag}"] = (ln, "default", [xn, w, b], refs[1])
    return out


def unstaged_variants(ns, m, n):
    """09's plan and 2 loads a thread, the row not staged in shared memory (one barrier fewer, X read twice)."""
    lanes, rows, _ = reduction_tables.plan(n, "float16")
    x = reduction_tables.logits(m, n)
    xn, w, b = reduction_tables.layer_norm_inputs(m, n)
    refs = reduction_tables.softmax_ref(x), reduction_tables.layer_norm_ref(xn, w, b)
    out = {}
    for loads in (1, 2):
        t, r = lanes // loads, rows * loads
        softmax, ln = schedules(ns, m, n, t, r, in_shared=False)
        out[f"softmax, {t} x {r}, not staged"] = (softmax, "default", [x], refs[0])
        out[f"ln, {t} x {r}, not staged"] = (ln, "default", [xn, w, b], refs[1])
    return out


if __name__ == "__main__":
    shapes = [(reduction_tables.ELEMENTS // n, n) for n in ROW_LENGTHS]
    time_variants(unstaged_variants if sys.argv[1:2] == ["unstaged"] else variants, shapes)
