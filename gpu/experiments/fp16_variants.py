"""What the fp16 experiments of notebook 06 share (06_fp16_structure.py, 06_mma.py, 06_mma16.py, 06_profile.py):
loading a sibling script (their names start with a digit, so `import` cannot), a fresh schedule
of the 4096^3 workload, and one table of schedule variants, each checked against a float64
reference and timed beside cuBLAS in the same run."""

import importlib.util
import sys
import time
from pathlib import Path

import numpy as np
import tvm

import helpers
from helpers import tuning

N = 4096
FLOPS = 2.0 * N**3


def load_script(filename: str):
    """The experiment script `filename` (beside this file) as a module."""
    path = Path(__file__).with_name(filename)
    spec = importlib.util.spec_from_file_location(path.stem.replace("06_", "exp06_"), path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def workload():
    return tuning.matmul_workload(N, N, N, "float16", "float32")


def fresh_schedule(func) -> tvm.s_tir.Schedule:
    """A Schedule of `func` on a copy of its module: a Schedule may rewrite the module it is given."""
    return tvm.s_tir.Schedule(tvm.ir.load_json(tvm.ir.save_json(tuning._as_module(func))))


def wmma_reference(func):
    """Notebook 06's WMMA template at notebook 05's tiles, as 06_fp16_structure.py builds it: the
    kernel every mma.sync experiment is compared with."""
    return load_script("06_fp16_structure.py").variant_schedule(load_script("06_tune.py"), {}, func)


def min_blocks_pipeline(blocks: int) -> str:
    """The name of a TIR pipeline, the default one, that also gives each kernel
    `__launch_bounds__(threads, blocks)`: ptxas then keeps registers low enough for `blocks` blocks
    per SM (spilling if it must). A schedule cannot say this: the attribute lives on the device
    function, which exists only after the pipeline splits host from device."""
    from tvm.tirx import compilation_pipeline

    name = f"s_tir_{blocks}_blocks_per_sm"
    if name not in compilation_pipeline.PIPELINE_MAP:
        def pipeline(**kwargs):
            lower, host, device = compilation_pipeline.get_tir_pipeline("s_tir", **kwargs)

            @tvm.tirx.transform.prim_func_pass(opt_level=0)
            def bound(func, _mod, _ctx):
                return func.with_attr("tirx.launch_bounds_min_blocks_per_sm", blocks)

            return lower, host, lambda: tvm.transform.Sequential([device(), bound])

        compilation_pipeline.PIPELINE_MAP[name] = pipeline
    return name


def check_factors(**splits):
    """Each split (name=(factors, extent)) must be positive factors whose product is the extent."""
    for name, (factors, extent) in splits.items():
        if min(factors) < 1 or int(np.prod(factors)) != extent:
            raise ValueError(f"{name} factors {factors} do not tile {extent}")


def tile_in_groups(sch, i, j, k, rows, cols, ks):
    """Split i and j by `rows`, `cols` into [groups, blocks per group, warps, outer, inner] and k by
    `ks` into [tiles, loads per tile, steps per load]; bind the groups to blockIdx.z/y and the
    blocks inside a group to blockIdx.x, so that blocks which run together share A and B in L2,
    and the warps to threadIdx.y. Returns the k tile loop, the load loop and the warp loop."""
    i0, i1, i2, i3, i4 = sch.split(i, rows)
    j0, j1, j2, j3, j4 = sch.split(j, cols)
    k0, k1, k2 = sch.split(k, ks)
    sch.reorder(i0, j0, i1, j1, i2, j2, k0, k1, i3, j3, k2, i4, j4)
    sch.bind(i0, "blockIdx.z")
    sch.bind(j0, "blockIdx.y")
    sch.bind(sch.fuse(i1, j1), "blockIdx.x")
    warp = sch.fuse(i2, j2)
    sch.bind(warp, "threadIdx.y")
    return k0, k1, warp


def compare(variants: dict, dry: bool, width: int = 48) -> int:
    """Build every variant (name: function returning its schedule, or its schedule and the name of
    the TIR pipeline to build it with) with cp.async on; on the GPU check each against a float64
    reference and time it beside cuBLAS; one row per variant."""
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (N, N)).astype("float16")
    b = rng.uniform(-1, 1, (N, N)).astype("float16")
    expected = None
    if not dry:
        import torch

        expected = (torch.from_numpy(a).cuda().double() @ torch.from_numpy(b).cuda().double()).cpu().numpy()
        blas = helpers.cublas_time(N, N, N, "float16")
        print(f"{helpers.local_gpu_spec().name}: cuBLAS float16 {blas:.4f} ms, {FLOPS / blas / 1e9:,.1f} TFLOP/s")
    print(f"{'variant':{width}s} {'ms':>8s} {'TFLOP/s':>8s} {'rel err':>8s} {'% cuBLAS':>9s}")
    for name, make_schedule in variants.items():
        t = time.time()
        try:
            made = make_schedule()
            sch, pipeline = made if isinstance(made, tuple) else (made, "default")
            with tvm.transform.PassContext(config={"tirx.use_async_copy": True}):
                ex = helpers.build(sch, helpers.listing_target() if dry else None, tir_pipeline=pipeline)
            if dry:
                print(f"{name:{width}s} builds ({time.time() - t:.0f} s)")
                continue
            dev = helpers.device()
            args = [tvm.runtime.tensor(a, dev), tvm.runtime.tensor(b, dev),
                    tvm.runtime.tensor(np.full((N, N), np.nan, "float32"), dev)]
            ex.mod["main"](*args)
            dev.sync()
            err = helpers.relative_error(args[2].numpy(), expected)
            ms_ = float(np.median(helpers.time_function(ex.mod, dev, args, repeat=30)))
            print(f"{name:{width}s} {ms_:8.4f} {FLOPS / ms_ / 1e9:8.1f} {err:8.1e} {blas / ms_:9.1%}")
        except Exception as e:  # noqa: BLE001
            print(f"{name:{width}s} FAILED: {str(e).strip().splitlines()[-1][:120]}")
        sys.stdout.flush()
    return 0
