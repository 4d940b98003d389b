"""Layer norm on 2048 rows of 32,768 fp16 values (2^26 elements, 09's sweep): which plan reaches the
copy? Variants of threads per row (256, 512 = `plan`'s, 1024), with the row staged in shared memory
or read twice from DRAM/L2. Each is checked against the float64 reference, then timed in 7 rounds
alternating with the float4 copy of the same bytes; median ms, % of that copy, % of 2,982 GB/s.

The schedule steps are 09's own functions, the cells it exports (`helpers.lessons`): an exploration,
not a lesson; the notebook's sweep is the record.

    python gpu/experiments/ln_long_rows.py
"""

import statistics

import numpy as np

import helpers
from helpers import bench, kernels, reduction_tables

M, N = 2048, 32768


def lesson():
    """09's exported definitions (its schedule steps, kernels and inputs), by name."""
    return vars(helpers.lessons.lesson("09_reductions"))


def against_copy(runs, nbytes, dev, target, rounds=7):
    """`runs` (name -> (executable, arguments)) and the float4 copy of an array of `nbytes`, timed in
    `rounds` rounds one after the other, 5 calls each: name -> the rounds' medians in ms (the copy's
    under "copy, float4")."""
    floats = nbytes // 4
    a = np.random.default_rng(0).standard_normal(floats, dtype=np.float32)
    ex = kernels.build(kernels.copy_kernel(floats, 256, 4), target)
    runs = {**runs, "copy, float4": (ex, bench._launch_once(ex, dev, [a, np.empty_like(a)], -1))}
    times = {k: [] for k in runs}
    for _ in range(rounds):
        for k, (ex, args) in runs.items():
            times[k].append(statistics.median(bench.time_function(ex.mod, dev, args, repeat=5)))
    return times


def report_against_copy(runs, nbytes, dev, target, width=28):
    """`against_copy`'s rounds, a line a kernel: median ms, GB/s (read and written), and % of the copy of the
    same bytes, the median with the quartiles of the per-round ratios."""
    times = against_copy(runs, nbytes, dev, target)
    copy = statistics.median(times["copy, float4"])
    for k, t in times.items():
        ms = statistics.median(t)
        q = np.percentile([copy / x for x in t], [25, 75])
        print(f"  {k:{width}s} {ms:.4f} ms  {2 * nbytes / ms / 1e6:6,.0f} GB/s  {copy / ms:6.1%} [{q[0]:.1%}-{q[1]:.1%}] "
              "of this copy", flush=True)


def main():
    ns = lesson()
    dev, target = helpers.device(), helpers.make_target()
    spec = helpers.local_gpu_spec()
    xn, w, b = reduction_tables.layer_norm_inputs(M, N)
    ref = reduction_tables.layer_norm_ref(xn, w, b)

    def variant(lanes, staged):
        sch = ns["one_kernel"](ns["layer_norm"](M, N, lanes), lanes, 1, 8)
        if staged:
            sch = ns["row_in_shared"](sch, lanes, 1, 8)
        return ns["scale_shift_in_registers"](sch, 8)

    x = reduction_tables.logits(M, N)
    softmax_ref = reduction_tables.softmax_ref(x)
    runs = {}
    for lanes in (256, 512, 1024):
        for staged in (True, False):
            name = f"{lanes} threads, {'staged' if staged else 'read twice'}"
            try:
                ex = kernels.build(variant(lanes, staged), target)
                args = bench._launch_once(ex, dev, [xn, w, b, np.empty_like(xn)], -1)
            except Exception as err:  # noqa: BLE001 - an exploration reports and goes on
                print(f"{name}: {str(err).splitlines()[0][:100]}")
                continue
            err = bench.relative_error(args[-1].numpy(), ref)
            print(f"{name}: rel. error {err:.1e}")
            if err < 2e-3:
                runs[name] = (ex, args)
    for lanes in (512, 1024):  # softmax as 09's fastest_softmax builds it, at 512 (plan's) and 1024 threads
        sch = ns["row_in_shared"](ns["one_kernel"](ns["online_softmax"](M, N, lanes), lanes, 1, 8), lanes, 1, 8)
        ex = kernels.build(sch, target)
        args = bench._launch_once(ex, dev, [x, np.empty_like(x)], -1)
        err = bench.relative_error(args[-1].numpy(), softmax_ref)
        print(f"softmax {lanes}: rel. error {err:.1e}")
        if err < 2e-3:
            runs[f"softmax, {lanes} threads, staged"] = (ex, args)
    times = against_copy(runs, xn.nbytes, dev, target)
    copy = statistics.median(times["copy, float4"])
    print(f"{spec.name}, {M}x{N} fp16, {2 * xn.nbytes >> 20} MiB moved; median of 7 rounds:")
    for k, t in times.items():
        ms = statistics.median(t)
        print(f"  {k:26s} {ms:.4f} ms  {2 * xn.nbytes / ms / 1e6:6,.0f} GB/s  {copy / ms:5.1%} of this copy"
              f"  {2 * xn.nbytes / ms / 1e6 / 2982:5.1%} of 2,982")


if __name__ == "__main__":
    main()
