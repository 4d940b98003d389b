"""Which change of structure could move the fp16 template past 05's numbers? (notebook 06)

The search over notebook 06's fp16 template landed on notebook 05's own tiles (2 x 4 warps of
4 x 4 fragments, k tile 64): its numbers are right, so only its structure can change. This
applies the template at those tiles with variants of its software pipeline, made by editing the
template's source as notebook 06 shows it, then checks and times each beside cuBLAS.

    python3 gpu/experiments/06_fp16_structure.py          # on the GPU
    python3 gpu/experiments/06_fp16_structure.py --dry    # no GPU: build each variant for sm_90
"""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import tvm

import helpers
from helpers import tuning

N = 4096
FLOPS = 2.0 * N**3
TILES = [[64, 4], [64, 4], [32, 2], [16, 4], [64, 4], [4, 1]]  # 05's: frags 4x4, warps 2x4, k 64, 1 per step
STAGE, ORDER = "[0, 0, 1, 2, 2]", "[0, 1, 3, 2, 4]"  # the template's k0 pipeline: 3 stages, early fragments
VARIANTS = {
    "3 stages, early fragments (the template)": {},
    "4 stages, early fragments": {STAGE: "[0, 0, 2, 3, 3]"},
    "5 stages, early fragments": {STAGE: "[0, 0, 3, 4, 4]"},
    "3 stages, fragments loaded one step ahead only": {STAGE: "[0, 0, 2, 2, 2]", ORDER: "[0, 1, 2, 3, 4]"},
}


def load_tune_script():
    spec = importlib.util.spec_from_file_location("tune06", Path(__file__).with_name("06_tune.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def variant_schedule(tune06, edits, func):
    template = tune06.notebook_template("fp16_template", edits)
    sketch = helpers.design_spaces(func, template)[0]
    picks = iter(TILES)
    decisions = {i: next(picks) for i in sketch.trace.insts if i.kind.name == "SamplePerfectTile"}
    # a Schedule may rewrite the module it is given in place: give it a copy
    sch = tvm.s_tir.Schedule(tvm.ir.load_json(tvm.ir.save_json(tuning._as_module(func))))
    tvm.s_tir.schedule.Trace(sketch.trace.insts, decisions).apply_to_schedule(sch, remove_postproc=True)
    return sch


def main(dry: bool) -> int:
    tune06 = load_tune_script()
    func = tuning.matmul_workload(N, N, N, "float16", "float32")
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (N, N)).astype("float16")
    b = rng.uniform(-1, 1, (N, N)).astype("float16")
    expected = None
    if not dry:
        import torch

        expected = (torch.from_numpy(a).cuda().double() @ torch.from_numpy(b).cuda().double()).cpu().numpy()
        blas = helpers.cublas_time(N, N, N, "float16")
        print(f"{helpers.local_gpu_spec().name}: cuBLAS float16 {blas:.4f} ms, {FLOPS / blas / 1e9:,.1f} TFLOP/s")
    print(f"{'variant':48s} {'ms':>8s} {'TFLOP/s':>8s} {'rel err':>8s} {'% cuBLAS':>9s}")
    for name, edits in VARIANTS.items():
        try:
            sch = variant_schedule(tune06, edits, func)
            with tvm.transform.PassContext(config={"tirx.use_async_copy": True}):
                ex = helpers.build(sch, helpers.listing_target() if dry else None)
            if dry:
                print(f"{name:48s} builds")
                continue
            dev = helpers.device()
            args = [tvm.runtime.tensor(a, dev), tvm.runtime.tensor(b, dev),
                    tvm.runtime.tensor(np.full((N, N), np.nan, "float32"), dev)]
            ex.mod["main"](*args)
            dev.sync()
            err = helpers.relative_error(args[2].numpy(), expected)
            ms_ = float(np.median(helpers.time_function(ex.mod, dev, args, repeat=30)))
            print(f"{name:48s} {ms_:8.4f} {FLOPS / ms_ / 1e9:8.1f} {err:8.1e} {blas / ms_:9.1%}")
        except Exception as e:  # noqa: BLE001
            print(f"{name:48s} FAILED: {str(e).strip().splitlines()[-1][:120]}")
    return 0


if __name__ == "__main__":
    sys.exit(main("--dry" in sys.argv))
