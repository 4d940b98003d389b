"""Notebook 06's fp16 tensor-core matmul beyond what the template search finds: what else its
structure could be, what the instructions allow, where the time goes.

    python gpu/experiments/06_fp16.py STUDY           # on a GPU
    python gpu/experiments/06_fp16.py STUDY --dry     # no GPU: build each variant for sm_90

The search over notebook 06's WMMA template (`fp16_template`) landed on notebook 05's own tiles:
its numbers are right, so only its structure can change. The studies:

  pipeline-depth         the template at 05's tiles with 3, 4 and 5 pipeline stages, and with
                         fragments loaded one step ahead only (edits of the template's source)
  mma-m16n8k8            TVM's mma rule structure (mma.sync m16n8k8 fed by ldmatrix from
                         XOR-swizzled shared memory, a cp.async pipeline, blocks launched in
                         groups), written as a schedule, eleven variants of its tiles and pipeline
  mma-m16n8k16           the same structure with the m16n8k16 instruction WMMA compiles to
                         (TVM's get_mma_intrin_group), fifteen variants
  mma-m16n8k16-refine    around the best of mma-m16n8k16: groups, stages, loads, padding, shapes
  mma-m16n8k16-epilogue  around the best of -refine: C stored two floats at a time, fragments
                         not loaded ahead, the pipeline order, a third block per SM
  mma-peak               the ceiling of mma.sync on registers alone (needs cupy; no --dry)
  profile                Nsight Compute, side by side: the WMMA template at 05's tiles,
                         mma-m16n8k16-refine's best, notebook 06's tuned mma template,
                         notebook 07's wgmma kernel and cuBLAS's own kernel, in one table
                         (needs ncu)
  input-data             the tuned template kernel and cuBLAS on random, constant and zero inputs
                         (no --dry)

The tables check every variant against a float64 reference and time it beside cuBLAS fp16 in the
same run, with the WMMA template at 05's tiles as the first row.
"""

from __future__ import annotations

import functools
import sys

import numpy as np
import tvm

import helpers
from lesson_code import hopper, template
from ncu import NCU_MENTIONED, TENSOR_PIPE_ROWS, launch_checked, ncu_rows, profile_side_by_side
from mma_fp16 import (BEST, MMA8, MMA16, MMA16_EPILOGUE, MMA16_REFINE, N, min_blocks_pipeline, mma8_schedule, mma16_schedule,
                      mma16_tiles)
from study import Study, cli, one_of
from variants import Variant, dry_run, fp16_matmuls_beside_cublas
from helpers import baselines
from helpers.tuned import _as_module

SHAPE = (N, N, N)
FLOPS = 2.0 * N**3
ASYNC = {"tirx.use_async_copy": True}  # every variant's pipeline copies with cp.async


# ------------------------------------------------------------------ shared by the studies


def workload():
    """C = A @ B at 4096^3, fp16 A and B (B stored K x N), fp32 C: notebook 06's fp16 workload."""
    return helpers.matmul_workload(N, N, N, "float16", "float32")


def fresh_schedule(func) -> tvm.s_tir.Schedule:
    """A Schedule of `func` on a copy of its module: a Schedule may rewrite the module it is given."""
    return tvm.s_tir.Schedule(tvm.ir.load_json(tvm.ir.save_json(_as_module(func))))


# ------------------------------------------------------------------ pipeline-depth: the WMMA template's own structure

TILES = [[64, 4], [64, 4], [32, 2], [16, 4], [64, 4], [4, 1]]  # 05's: frags 4x4, warps 2x4, k 64, 1 per step
STAGE, ORDER = "[0, 0, 1, 2, 2]", "[0, 1, 3, 2, 4]"  # the template's k0 pipeline: 3 stages, early fragments
PIPELINE_DEPTH = {
    "3 stages, early fragments (the template)": {},
    "4 stages, early fragments": {STAGE: "[0, 0, 2, 3, 3]"},
    "5 stages, early fragments": {STAGE: "[0, 0, 3, 4, 4]"},
    "3 stages, fragments loaded one step ahead only": {STAGE: "[0, 0, 2, 2, 2]", ORDER: "[0, 1, 2, 3, 4]"},
}


def template_at_05_tiles(func, edits: dict | None = None) -> tvm.s_tir.Schedule:
    """Notebook 06's `fp16_template` (its source changed by `edits`) with its samples set to 05's tiles."""
    sketch = helpers.design_spaces(func, template("fp16_template", edits))[0]
    picks = iter(TILES)
    decisions = {i: next(picks) for i in sketch.trace.insts if i.kind.name == "SamplePerfectTile"}
    sch = fresh_schedule(func)
    tvm.s_tir.schedule.Trace(sketch.trace.insts, decisions).apply_to_schedule(sch, remove_postproc=True)
    return sch


# ------------------------------------------------------------------ the tables


def table(rows: dict) -> list[Variant]:
    """The WMMA template at 05's tiles (the reference every structure is compared with), then `rows`:
    name: schedule arguments of mma8_tiles (a tuple) or of mma16_tiles (a dict, which may ask for
    blocks_per_sm, a TIR pipeline that bounds the kernel's registers)."""
    func = workload()
    variants = [Variant("WMMA template at 05's tiles (reference)", functools.partial(template_at_05_tiles, func),
                        SHAPE, ASYNC)]
    for name, args in rows.items():
        if isinstance(args, tuple):
            make = functools.partial(lambda a: mma8_schedule(fresh_schedule(func), *a), args)
            variants.append(Variant(name, make, SHAPE, ASYNC))
        else:
            args = dict(args)
            blocks = args.pop("blocks_per_sm", None)
            make = functools.partial(lambda a: mma16_schedule(fresh_schedule(func), **a), args)
            variants.append(Variant(name, make, SHAPE, ASYNC, min_blocks_pipeline(blocks) if blocks else "default"))
    return variants


def compare(variants: list[Variant], dry: bool) -> int:
    """Build every variant; on the GPU check each against a float64 reference and time it beside cuBLAS."""
    return dry_run(variants) if dry else fp16_matmuls_beside_cublas(variants, N)


def pipeline_depth(args) -> int:
    func = workload()
    return compare([Variant(name, functools.partial(template_at_05_tiles, func, edits), SHAPE, ASYNC)
                    for name, edits in PIPELINE_DEPTH.items()], args.dry)


# ------------------------------------------------------------------ mma-peak: the instruction's own ceiling

PEAK_SOURCE = r"""
extern "C" __global__ void peak_k16(float* out, int iters) {
    unsigned a[4] = {threadIdx.x, threadIdx.x + 1, threadIdx.x + 2, threadIdx.x + 3}, b[2] = {threadIdx.x, 7};
    float c[CHAINS][4] = {};
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int ch = 0; ch < CHAINS; ++ch)
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                         : "+f"(c[ch][0]), "+f"(c[ch][1]), "+f"(c[ch][2]), "+f"(c[ch][3])
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
    float s = 0.f;
#pragma unroll
    for (int ch = 0; ch < CHAINS; ++ch) s += c[ch][0] + c[ch][1] + c[ch][2] + c[ch][3];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
extern "C" __global__ void peak_k8(float* out, int iters) {
    unsigned a[2] = {threadIdx.x, threadIdx.x + 1}, b = threadIdx.x;
    float c[CHAINS][4] = {};
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int ch = 0; ch < CHAINS; ++ch)
            asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
                         : "+f"(c[ch][0]), "+f"(c[ch][1]), "+f"(c[ch][2]), "+f"(c[ch][3])
                         : "r"(a[0]), "r"(a[1]), "r"(b));
    }
    float s = 0.f;
#pragma unroll
    for (int ch = 0; ch < CHAINS; ++ch) s += c[ch][0] + c[ch][1] + c[ch][2] + c[ch][3];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
"""
CHAINS = 8  # independent accumulators per warp, as many as a 64x32 warp tile of m16n8 fragments


def peak(name, k, warps_per_sm, sms, iters=4096, repeat=20):
    """TFLOP/s of `name` with `warps_per_sm` warps on each SM (one block of them per SM)."""
    import cupy as cp

    kernel = cp.RawModule(code=PEAK_SOURCE, options=("-arch=sm_90", f"-DCHAINS={CHAINS}")).get_function(name)
    threads = 32 * warps_per_sm
    out = cp.empty(sms * threads, "float32")
    start, end = cp.cuda.Event(), cp.cuda.Event()
    for _ in range(3):  # warm up
        kernel((sms,), (threads,), (out, np.int32(iters)))
    times = []
    for _ in range(repeat):
        start.record()
        kernel((sms,), (threads,), (out, np.int32(iters)))
        end.record()
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end))
    flops = 2.0 * 16 * 8 * k * CHAINS * iters * warps_per_sm * sms
    return flops / np.median(times) / 1e9


def mma_peak(args) -> int:
    """How fast can tensor cores go through the instructions TensorIR emits? TVM 0.27 reaches them
    through WMMA and `mma.sync` (both compile to HMMA); Hopper's asynchronous `wgmma`, which cuBLAS
    uses, has no TensorIR intrinsic. Every warp runs independent chains of `mma.sync` on registers
    only, no memory traffic at all, for both shapes TVM has (m16n8k16 behind WMMA, m16n8k8 behind
    its mma rule), at several warps per SM, beside cuBLAS fp16 at 4096^3 in the same run. A kernel
    built from these instructions cannot beat this ceiling, whatever its schedule."""
    import cupy as cp

    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    blas = helpers.cublas_time(N, N, N, "float16")
    blas_tflops = FLOPS / blas / 1e9
    print(f"{helpers.local_gpu_spec().name}, {sms} SMs: cuBLAS float16 {N}^3 {blas:.4f} ms = {blas_tflops:,.1f} TFLOP/s")
    print(f"{CHAINS} independent mma.sync chains per warp, registers only, one block per SM")
    print(f"{'instruction':32s} {'warps/SM':>8s} {'TFLOP/s':>8s} {'% cuBLAS':>9s}")
    for name, k, label in (("peak_k16", 16, "mma.sync m16n8k16 (WMMA's)"), ("peak_k8", 8, "mma.sync m16n8k8 (mma rule's)")):
        for warps in (4, 8, 16):
            t = peak(name, k, warps, sms)
            print(f"{label:32s} {warps:8d} {t:8.1f} {t / blas_tflops:9.1%}")
    return 0


# ------------------------------------------------------------------ profile: where the time goes, under Nsight Compute

def profiled() -> dict[str, Variant]:
    """The TVM kernels `profile` looks into, beside cuBLAS's own."""
    func = workload()
    return {
        "wmma": Variant("WMMA template at 05's tiles (05's best structure)",
                        functools.partial(template_at_05_tiles, func), SHAPE, ASYNC),
        "mma": Variant("mma.sync m16n8k8, 2x4 warps of 64x64, k tile 64",
                       lambda: mma8_schedule(fresh_schedule(func), *MMA8["2x4 warps of 64x64, k tile 64"]), SHAPE, ASYNC),
        "mma16": Variant("mma.sync m16n8k16, 2x2 warps of 64x64, k 64, groups of 4x4",
                         lambda: mma16_schedule(fresh_schedule(func), **mma16_tiles(**BEST)), SHAPE, ASYNC),
        "tuned": Variant("06's tuned mma template (committed database)",
                         lambda: helpers.replay(helpers.database_dir("matmul_fp16_4096_mma_template"), func).sch,
                         SHAPE, ASYNC),
        "wgmma": Variant("07's wgmma + TMA kernel (TIRx), 128x256, 4 stages, warp-specialized",
                         lambda: hopper().hopper_matmul(N, N, N),
                         SHAPE, {}, "tirx", "sm_90a"),
    }


KERNELS = ("wmma", "mma", "mma16", "tuned", "wgmma", "cublas")
PROFILED_BY_DEFAULT = ("wmma", "mma16", "tuned", "wgmma", "cublas")


def launch(args) -> int:
    """Launch one kernel 4 times on uniform(-1, 1) inputs (ncu profiles the third); check a TVM
    kernel's first 256 rows against float64. "cublas" is torch's fp16 matmul, the baseline."""
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (N, N)).astype("float16")
    b = rng.uniform(-1, 1, (N, N)).astype("float16")
    return launch_checked(args.kernel, a, b, None if args.kernel == "cublas" else profiled()[args.kernel], "float16")


PROFILE_ROWS = ncu_rows(FLOPS, TENSOR_PIPE_ROWS)


def profile(args) -> int:
    """Each kernel under Nsight Compute at the clocks timing runs see; the metrics that say where
    the time goes side by side, then every metric of tensor pipes, stalls, conflicts and launch."""
    kernels = args.kernel or list(PROFILED_BY_DEFAULT)
    if args.dry:
        return dry_run([profiled()[k] for k in kernels if k != "cublas"])
    return profile_side_by_side(__file__, kernels, PROFILE_ROWS,
                                f"{N}^3 fp16 (cuBLAS writes fp16 C, the TVM kernels fp32 C)",
                                ("tensor", "gmma", *NCU_MENTIONED))


# ------------------------------------------------------------------ input-data: does the data change the time?


def input_data(args) -> int:
    """While tuning, MetaSchedule timed the best fp16 template record faster than notebook 06 times
    it. The tuner fills the inputs with its own random data; the notebook uses uniform(-1, 1) and
    the cuBLAS baseline normal(0, 1). This times the same tuned kernel and cuBLAS (torch) on the
    same arrays, for several kinds of input, in one process."""
    import torch

    func = workload()
    best = helpers.replay(helpers.database_dir("matmul_fp16_4096_template"), func)
    with tvm.transform.PassContext(config=ASYNC):
        ex = helpers.build(best.sch)
    dev = helpers.device()
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    rng = np.random.default_rng(0)
    inputs = {
        "uniform(-1, 1), as notebook 06": lambda: rng.uniform(-1, 1, (N, N)),
        "normal(0, 1), as the cuBLAS baseline": lambda: rng.standard_normal((N, N)),
        "uniform(0, 1)": lambda: rng.uniform(0, 1, (N, N)),
        "all ones": lambda: np.ones((N, N)),
        "all zeros": lambda: np.zeros((N, N)),
    }
    print(f"{helpers.local_gpu_spec().name}; best record: {best.describe()}")
    print(f"{'inputs':38s} {'TVM ms':>8s} {'TFLOP/s':>8s} {'cuBLAS ms':>10s} {'TFLOP/s':>8s} {'ratio':>6s}")
    for name, make in inputs.items():
        a, b = make().astype("float16"), make().astype("float16")
        fn_args = [tvm.runtime.tensor(x, dev) for x in (a, b, np.zeros((N, N), "float32"))]
        tvm_ms = float(np.median(helpers.time_function(ex.mod, dev, fn_args, repeat=30)))
        ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
        tc = torch.empty(N, N, device="cuda", dtype=torch.float16)
        blas_ms = baselines.event_median_ms(lambda: torch.matmul(ta, tb, out=tc), torch.cuda.Event,
                                        torch.cuda.synchronize, repeat=30, warmup=3)
        print(f"{name:38s} {tvm_ms:8.4f} {FLOPS / tvm_ms / 1e9:8.1f} {blas_ms:10.4f} {FLOPS / blas_ms / 1e9:8.1f} "
              f"{blas_ms / tvm_ms:6.1%}")
    return 0


STUDIES = {
    "pipeline-depth": Study(pipeline_depth, "the WMMA template at 05's tiles with deeper and shallower pipelines"),
    "mma-m16n8k8": Study(lambda args: compare(table(MMA8), args.dry),
                         "TVM's mma rule structure (m16n8k8, ldmatrix, swizzled rows, groups), eleven variants"),
    "mma-m16n8k16": Study(lambda args: compare(table(MMA16), args.dry),
                          "the same structure with the m16n8k16 instruction, fifteen variants"),
    "mma-m16n8k16-refine": Study(lambda args: compare(table(MMA16_REFINE), args.dry),
                                 "around mma-m16n8k16's best: groups, stages, loads, padding, block shapes"),
    "mma-m16n8k16-epilogue": Study(lambda args: compare(table(MMA16_EPILOGUE), args.dry),
                                   "around the refined best: C stored in pairs, no fragment prefetch, "
                                   "pipeline order, a third block per SM"),
    "mma-peak": Study(mma_peak, "the ceiling of mma.sync m16n8k16 and m16n8k8 on registers alone",
                      dry=False, needs=("cupy",)),
    "profile": Study(profile, "Nsight Compute side by side: 05's structure, the best mma.sync kernel, 06's "
                     "tuned kernel, 07's wgmma kernel and cuBLAS",
                     needs=("ncu",), arguments=((("kernel",), dict(nargs="*", type=one_of(KERNELS), metavar="KERNEL",
                                                                 help=f"of {', '.join(KERNELS)} (default: {', '.join(PROFILED_BY_DEFAULT)})")),)),
    "launch": Study(launch, "(run by profile under ncu) build, check and launch one kernel", dry=False, needs=("torch",),
                    logged=False, arguments=((("kernel",), dict(choices=KERNELS)),)),
    "input-data": Study(input_data, "the tuned template kernel and cuBLAS on random, constant and zero inputs",
                        dry=False),
}

if __name__ == "__main__":
    sys.exit(cli(__file__, __doc__, STUDIES))
