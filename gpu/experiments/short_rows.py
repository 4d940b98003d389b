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

What it found (H200, 2026-11-29, `results/short_rows*.nvidia-h200.txt`): not the loads. At 128 and 256, 2
loads a thread are level with one (128: softmax 89.6% / layer norm 80.2% against 89.3% / 81.6%) and 4 are
slower (60% / 56% at 128). At 1,024, 4 loads a thread on a warp a row win (softmax 81.1% -> 86.2%, layer
norm 78.3% -> 94.6%), 2 on 64 threads do not: the warp needs no barrier between warps. So `plan` now gives
rows of 1,024 a warp. Unstaged is slower everywhere (1,024: 71% / 64%): X read twice costs more than the
barrier.

`padded` (H200, 2026-11-29, `results/short_rows.padded.nvidia-h200.txt`): at 128 layer norm 81.1% -> 88.3%,
softmax 88.5% -> 90.1%; at 256 level (a warp holds one row there). Taken into 09 (`padded`).

`unstaged`: 09's plan and 2 loads a thread without `row_in_shared` (X read twice, no staging barrier).
`padded`: at 128 and 256, 09's plan with the staged rows padded (09's `padded`; at commit 6e87212 the study
ran the same `storage_align` as its own `padded_stage`): the two rows a warp reads at 128 fall on different
banks. `blocks`: at 128 and 256, 09's plan with blocks of 256 and 512 threads (more rows a block). `profile`: 09's
kernels at rows of 128 and 512 under Nsight Compute (`launch N:NAME` runs one). `half4`: 09's plan with
the last pass reading the staged row 8 bytes at a time (`half4_reads`), at rows of 128 to 32,768 (level
everywhere on the H200, 2026-11-29: the conflicts are not the cost).

    python gpu/experiments/short_rows.py [unstaged | blocks | profile | half4 | padded]
"""

import sys

from helpers import reduction_tables
from helpers.lessons.reductions import padded
from ln_scale_shift import launch as shared_launch
from ln_scale_shift import staged, time_variants

ROW_LENGTHS = (128, 256, 1024)


def schedules(ns, m, n, lanes, rows, in_shared=True):
    """09's softmax and layer norm at m x n with `lanes` threads a row and `rows` rows a block, staged and
    vectorized as `fastest_softmax` and `fastest_layer_norm` do (or, `in_shared` false, not staged: X read
    twice, the second time from L1 or L2)."""
    def prepared(module):
        return staged(ns, module, lanes, rows) if in_shared else ns["one_kernel"](module, lanes, rows, 8)
    return (prepared(ns["online_softmax"](m, n, lanes)),
            ns["scale_shift_in_registers"](prepared(ns["layer_norm"](m, n, lanes)), 8))


def named(m, n, pairs):
    """name -> (schedule, TIR pipeline, inputs, float64 reference) for each (tag, softmax, layer norm) of
    `pairs`, on m x n inputs made once."""
    x = reduction_tables.logits(m, n)
    xn, w, b = reduction_tables.layer_norm_inputs(m, n)
    softmax_ref, ln_ref = reduction_tables.softmax_ref(x), reduction_tables.layer_norm_ref(xn, w, b)
    out = {}
    for tag, softmax, ln in pairs:
        out[f"softmax, {tag}"] = (softmax, "default", [x], softmax_ref)
        out[f"ln, {tag}"] = (ln, "default", [xn, w, b], ln_ref)
    return out


def variants(ns, m, n):
    """Each kernel with 09's plan and with its threads a row divided by 2 and 4 (twice and four times the
    16-byte loads a thread)."""
    lanes, rows, _ = reduction_tables.plan(n, "float16")

    def pair(loads):
        t, r = lanes // loads, rows * loads
        each = n // (t * 8)  # 16-byte loads a thread
        tag = f"{t} threads x {r} rows, {each} load{'s' if each > 1 else ''}" + (" (09's)" if loads == 1 else "")
        return (tag, *schedules(ns, m, n, t, r))
    return named(m, n, [pair(loads) for loads in (1, 2, 4)])


def unstaged_variants(ns, m, n):
    """09's plan and 2 loads a thread, the row not staged in shared memory (one barrier fewer, X read twice)."""
    lanes, rows, _ = reduction_tables.plan(n, "float16")
    return named(m, n, [(f"{lanes // k} x {rows * k}, not staged", *schedules(ns, m, n, lanes // k, rows * k, False))
                        for k in (1, 2)])


def block_variants(ns, m, n):
    """09's plan with blocks of 128 (its own), 256 and 512 threads: the same threads a row, more rows a block."""
    lanes, rows, _ = reduction_tables.plan(n, "float16")
    return named(m, n, [(f"{lanes} x {rows * k} (block of {lanes * rows * k})", *schedules(ns, m, n, lanes, rows * k))
                        for k in (1, 2, 4)])


def half4_reads(sch):
    """The last pass reads the staged row 4 values (8 bytes) at a time: its loop of 8 values a thread split in
    two and the halves vectorized. 09's pass reads them one at a time, 2 bytes from threads 16 bytes apart,
    which the profile shows as shared-memory bank conflicts. (All 8 at once would be float32x8 arithmetic,
    which TVM 0.27's CUDA code generator writes as a `make_ulonglong4` of 8 values: nvcc refuses it.)"""
    sch.vectorize(sch.split(sch.get_loops(sch.get_sblock("norm"))[-1], [None, 4])[1])
    return sch


def beside_plan(step, label):
    """A study's variants (ns, m, n) -> name -> kernel: 09's plan, and the same with `step` applied to each
    schedule, named by `label`."""
    def variants_of(ns, m, n):
        lanes, rows, _ = reduction_tables.plan(n, "float16")
        plain = schedules(ns, m, n, lanes, rows)
        stepped = [step(sch) for sch in schedules(ns, m, n, lanes, rows)]
        return named(m, n, [(f"{lanes} x {rows} (09's)", *plain), (f"{lanes} x {rows}, {label}", *stepped)])
    return variants_of


half4_variants = beside_plan(half4_reads, "8-byte reads")
padded_variants = beside_plan(padded, "rows padded")


def launch(spec):
    """(Run by `profile` under ncu.) `variants`' kernel named by 'N:NAME' at 2^26 / N x N, launched 4 times."""
    n, name = spec.split(":", 1)
    shared_launch(name, variants, (reduction_tables.ELEMENTS // int(n), int(n)), spec)


PROFILED = ["128:ln, 16 threads x 8 rows, 1 load (09's)", "512:ln, 32 threads x 4 rows, 2 loads (09's)",
            "128:softmax, 16 threads x 8 rows, 1 load (09's)", "512:softmax, 32 threads x 4 rows, 2 loads (09's)"]


def profile():
    """09's layer norm and softmax at rows of 128 (80% and 89% of the copy) and 512 (96% and 97%) under Nsight
    Compute, side by side: instructions, issue and stalls, memory."""
    from ncu import NCU_MENTIONED, ncu_first, ncu_rows, profile_side_by_side

    memory = {"L1 hit rate (%)": lambda m: ncu_first(m, "l1tex__t_sector_hit_rate.pct"),
              "DRAM throughput (% of peak)": lambda m: ncu_first(m, "dram__throughput.avg.pct_of_peak_sustained_elapsed")}
    return profile_side_by_side(__file__, PROFILED, {**ncu_rows(0, {}), **memory}, "2^26 fp16 values",
                                ("dram__", "l1tex__t_", *NCU_MENTIONED))


if __name__ == "__main__":
    shapes = [(reduction_tables.ELEMENTS // n, n) for n in ROW_LENGTHS]
    if sys.argv[1:2] == ["launch"]:
        launch(sys.argv[2])
    elif sys.argv[1:2] == ["profile"]:
        sys.exit(profile())
    elif sys.argv[1:2] == ["half4"]:
        time_variants(half4_variants, [(reduction_tables.ELEMENTS // n, n) for n in (128, 256, 512, 1024, 2048, 8192, 32768)])
    elif sys.argv[1:2] == ["padded"]:
        time_variants(padded_variants, shapes[:2])
    elif sys.argv[1:2] == ["blocks"]:
        time_variants(block_variants, shapes[:2])
    else:
        time_variants(unstaged_variants if sys.argv[1:2] == ["unstaged"] else variants, shapes)
