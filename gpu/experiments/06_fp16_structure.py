"""Which change of structure could move the fp16 template past 05's numbers? (notebook 06)

The search over notebook 06's fp16 template landed on notebook 05's own tiles (2 x 4 warps of
4 x 4 fragments, k tile 64): its numbers are right, so only its structure can change. This
applies the template at those tiles with variants of its software pipeline, made by editing the
template's source as notebook 06 shows it, then checks and times each beside cuBLAS.

    python3 gpu/experiments/06_fp16_structure.py          # on the GPU
    python3 gpu/experiments/06_fp16_structure.py --dry    # no GPU: build each variant for sm_90
"""

import functools
import sys

import tvm

import helpers
from fp16_variants import compare, fresh_schedule, load_script, workload

TILES = [[64, 4], [64, 4], [32, 2], [16, 4], [64, 4], [4, 1]]  # 05's: frags 4x4, warps 2x4, k 64, 1 per step
STAGE, ORDER = "[0, 0, 1, 2, 2]", "[0, 1, 3, 2, 4]"  # the template's k0 pipeline: 3 stages, early fragments
VARIANTS = {
    "3 stages, early fragments (the template)": {},
    "4 stages, early fragments": {STAGE: "[0, 0, 2, 3, 3]"},
    "5 stages, early fragments": {STAGE: "[0, 0, 3, 4, 4]"},
    "3 stages, fragments loaded one step ahead only": {STAGE: "[0, 0, 2, 2, 2]", ORDER: "[0, 1, 2, 3, 4]"},
}


def variant_schedule(tune06, edits, func):
    template = tune06.notebook_template("fp16_template", edits)
    sketch = helpers.design_spaces(func, template)[0]
    picks = iter(TILES)
    decisions = {i: next(picks) for i in sketch.trace.insts if i.kind.name == "SamplePerfectTile"}
    sch = fresh_schedule(func)
    tvm.s_tir.schedule.Trace(sketch.trace.insts, decisions).apply_to_schedule(sch, remove_postproc=True)
    return sch


def main(dry: bool) -> int:
    tune06, func = load_script("06_tune.py"), workload()
    return compare({name: functools.partial(variant_schedule, tune06, edits, func)
                    for name, edits in VARIANTS.items()}, dry, width=48)


if __name__ == "__main__":
    sys.exit(main("--dry" in sys.argv))
