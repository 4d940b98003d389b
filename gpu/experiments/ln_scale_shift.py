"""Layer norm's long rows on the H200: 09's kernel reads 79% of the copy at rows of 32,768 fp16 and 90% at
16,384 (`ln_two_chains.py`), where the softmax on the same plan (a block of 512 threads a row, the row
staged in shared memory) reads 96-98% on the H100 (`ln_long_rows.py`). Neither the chain of Welford
updates (`ln_two_chains.py`) nor the rolled last loop (`ln_unroll.py`) was it.

What the softmax does not read is the scale and shift. At 32k a block stages 64 KiB of its row, three
blocks an SM take 192 KiB of its 256 KiB of L1 and shared memory, and W and B (64 KiB each) cannot stay
in the rest: every row reads all 128 KiB of them again from L2, twice the bytes of the row it
normalizes. At 16k (32 KiB staged, four blocks an SM) half of them fit.

Variants, at 2048x32768 and 4096x16384 (2^26 fp16 values, 256 MiB moved: well beyond L2):
- `ln`: 09's layer norm (`fastest_layer_norm`'s steps, `plan`'s 512 / 512 threads);
- `ln, no scale or shift`: the same kernel with Y = (X - mean) * rstd (a diagnostic, not a layer norm);
- `softmax`: 09's online softmax, staged, same plan;
- `ln, 1024 threads`: two blocks an SM (128 KiB staged), so L1 keeps about 124 KiB: most of W and B.
Each is checked against its float64 reference, then timed in 7 rounds alternating with the float4 copy
of the same bytes. `profile` runs 09's layer norm and the diagnostic at 32k under Nsight Compute.
`tail`: the same kernels on 4 times the rows (1 GiB moved). A block at 32k lives about 16 us (three an SM,
2048 rows in 5.2 waves), a quarter of the copy's 66 us on the H200, so the last wave's idle SMs weigh on
a short run; on 4 times the rows they weigh a quarter as much.

    python gpu/experiments/ln_scale_shift.py [profile | tail]
"""

import sys

import numpy as np
from tvm.script import ir as I
from tvm.script import tirx as T

import helpers
from helpers import bench, kernels, reduction_tables
from ln_long_rows import lesson, report_against_copy

SHAPES = [(2048, 32768), (4096, 16384)]


def layer_norm_plain(M, N, lanes, dtype="float16", eps=1e-5):
    """09's `layer_norm` without the scale and shift: Y = (X - mean) / sqrt(var + eps)."""
    steps = N // lanes

    @I.ir_module
    class Plain:
        @T.prim_func(s_tir=True)
        def main(X: T.Buffer((M, N), dtype), Y: T.Buffer((M, N), dtype)):
            T.func_attr({"tirx.noalias": True})
            lane_mean = T.sblock_alloc_buffer((M, lanes), "float32")
            lane_m2 = T.sblock_alloc_buffer((M, lanes), "float32")
            mean = T.sblock_alloc_buffer((M,), "float32")
            m2 = T.sblock_alloc_buffer((M,), "float32")
            for i, t, k in T.grid(M, lanes, steps):
                with T.sblock("welford"):
                    vi, vt, vk = T.axis.remap("SSR", [i, t, k])
                    with T.init():
                        lane_mean[vi, vt] = T.float32(0)
                        lane_m2[vi, vt] = T.float32(0)
                    delta = T.meta_var(T.Cast("float32", X[vi, vk * lanes + vt]) - lane_mean[vi, vt])
                    lane_m2[vi, vt] = lane_m2[vi, vt] + delta * delta * (T.Cast("float32", vk) / T.Cast("float32", vk + 1))
                    lane_mean[vi, vt] = lane_mean[vi, vt] + delta * (T.float32(1) / T.Cast("float32", vk + 1))
            for i, t in T.grid(M, lanes):
                with T.sblock("mean"):
                    vi, vt = T.axis.remap("SR", [i, t])
                    with T.init(): mean[vi] = T.float32(0)
                    mean[vi] = mean[vi] + lane_mean[vi, vt] * T.float32(1 / lanes)
            for i, t in T.grid(M, lanes):
                with T.sblock("m2"):
                    vi, vt = T.axis.remap("SR", [i, t])
                    with T.init(): m2[vi] = T.float32(0)
                    spread = T.meta_var(lane_mean[vi, vt] - mean[vi])
                    m2[vi] = m2[vi] + (lane_m2[vi, vt] + T.float32(steps) * spread * spread)
            for i, j in T.grid(M, N):
                with T.sblock("norm"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    rstd = T.meta_var(T.rsqrt(m2[vi] * T.float32(1 / N) + T.float32(eps)))
                    Y[vi, vj] = T.Cast(dtype, (T.Cast("float32", X[vi, vj]) - mean[vi]) * rstd)
    return Plain


def staged(ns, mod, threads, rows=1):
    """09's steps up to the row staged in shared memory (`one_kernel`, `row_in_shared`), `threads` a row and
    `rows` rows a block."""
    return ns["row_in_shared"](ns["one_kernel"](mod, threads, rows, 8), threads, rows, 8)


def layer_norm_schedule(ns, module, threads, rows=1):
    """09's layer-norm schedule on `module` (09's `layer_norm(m, n, threads)` or a study's variant of it)."""
    return ns["scale_shift_in_registers"](staged(ns, module, threads, rows), 8)


def variants(ns, m, n):
    """name -> (schedule, TIR pipeline, inputs, float64 reference) at m x n."""
    lanes = reduction_tables.plan(n, "float16")[0]
    xn, w, b = reduction_tables.layer_norm_inputs(m, n)
    ref = reduction_tables.layer_norm_ref(xn, w, b)
    plain_ref = reduction_tables.layer_norm_ref(xn, np.ones_like(w), np.zeros_like(b))
    x = reduction_tables.logits(m, n)

    def ln(threads):
        return layer_norm_schedule(ns, ns["layer_norm"](m, n, threads), threads)

    return {
        "ln": (ln(lanes), "default", [xn, w, b], ref),
        "ln, no scale or shift": (staged(ns, layer_norm_plain(m, n, lanes), lanes), "default", [xn], plain_ref),
        "softmax": (staged(ns, ns["online_softmax"](m, n, lanes), lanes), "default", [x],
                    reduction_tables.softmax_ref(x)),
        "ln, 1024 threads": (ln(1024), "default", [xn, w, b], ref),
    }


def time_variants(variants_of, shapes, scale=1):
    """Each kernel of `variants_of(ns, m, n)` (name -> (schedule or module, TIR pipeline, inputs, float64
    reference); ns: 09's definitions) at each shape, its rows times `scale`: checked against its reference,
    then timed in 7 rounds against the float4 copy of the same bytes (`report_against_copy`)."""
    ns = lesson()
    dev, target = helpers.device(), helpers.make_target()
    m0, n0 = shapes[0]
    print(f"{helpers.local_gpu_spec().name}: 2^{(m0 * n0 * scale).bit_length() - 1} fp16 values, "
          "7 rounds against the float4 copy of the same bytes")
    for m, n in shapes:
        m *= scale
        runs = {}
        for name, (kernel, pipeline, inputs, ref) in variants_of(ns, m, n).items():
            try:
                regs = f"{kernels.ptxas_report(kernel, target)[0].registers} registers, " if pipeline == "default" else ""
                ex = kernels.build(kernel, target, pipeline)
                args = bench._launch_once(ex, dev, [*inputs, np.empty((m, n), "float16")], -1)
            except Exception as err:  # noqa: BLE001 - a study reports and goes on
                print(f"  {m}x{n} {name}: {str(err).splitlines()[-1][:150]}", flush=True)
                continue
            err = bench.relative_error(args[-1].numpy(), ref)
            print(f"  {m}x{n} {name}: {regs}rel. error {err:.1e}", flush=True)
            if err < 2e-3:
                runs[f"{m}x{n} {name}"] = (ex, args)
        report_against_copy(runs, m * n * 2, dev, target, 32)


def launch(name, variants_of=None, shape=None, label=None):
    """(Run by `profile` under ncu.) `variants_of`'s kernel `name` (default: this study's) at `shape` (default
    2048x32768), launched 4 times; its relative error printed after `label` (default: the name)."""
    m, n = shape or SHAPES[0]
    kernel, pipeline, inputs, ref = (variants_of or variants)(lesson(), m, n)[name]
    ex = kernels.build(kernel, helpers.make_target(), pipeline)
    args = bench._launch_once(ex, helpers.device(), [*inputs, np.empty((m, n), "float16")], -1)
    for _ in range(3):
        ex.mod["main"](*args)
    helpers.device().sync()
    print(f"{label or name}: relative error {bench.relative_error(args[-1].numpy(), ref):.1e}")


def profile(script=__file__, names=("ln", "ln, no scale or shift", "softmax")):
    """`python <script> launch NAME` for each of `names` (kernels at 2048x32768) under Nsight Compute, side
    by side: where the bytes come from and where the warps wait."""
    from ncu import NCU_MENTIONED, ncu_first, ncu_rows, profile_side_by_side

    memory = {
        "L1 hit rate (%)": lambda m: ncu_first(m, "l1tex__t_sector_hit_rate.pct"),
        "L2 throughput (% of peak)": lambda m: ncu_first(m, "lts__throughput.avg.pct_of_peak_sustained_elapsed"),
        "L1 throughput (% of peak)": lambda m: ncu_first(m, "l1tex__throughput.avg.pct_of_peak_sustained_active"),
    }
    return profile_side_by_side(script, list(names), {**ncu_rows(0, {}), **memory},
                                "2048x32768 fp16", ("lts__t", "l1tex__t_", "dram__", "lts__throughput", *NCU_MENTIONED))


if __name__ == "__main__":
    if sys.argv[1:2] == ["profile"]:
        sys.exit(profile())
    elif sys.argv[1:2] == ["tail"]:
        time_variants(variants, SHAPES, 4)
    elif sys.argv[1:2] == ["launch"]:
        launch(sys.argv[2])
    else:
        time_variants(variants, SHAPES)
