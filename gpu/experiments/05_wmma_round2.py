"""Round 2 of the WMMA exploration for notebook 05, around round 1's best (05_wmma.txt):
k tile 64 with the "early fragment" pipeline (the next tile's first fragments loaded before the
current tile's last mma), other warp tiles, k 128, padding 16/24, and the ldmatrix + mma.sync
variant with the same pipeline. Same checks, timing and table as 05_wmma.py.

    PYTHONPATH=. python gpu/experiments/05_wmma_round2.py          # on the H100
    PYTHONPATH=. python gpu/experiments/05_wmma_round2.py --dry    # anywhere: only build
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_spec = importlib.util.spec_from_file_location("wmma_round1", Path(__file__).with_name("05_wmma.py"))
r1 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(r1)


def variants():
    V = []

    def add(name, cfg_async=True, **kw):
        V.append((name, lambda M, N, K, kw=kw: r1.wmma(M, N, K, **kw), cfg_async))

    base = dict(vec=8, pad=8, scope="shared.dyn", async_=True, inner_pipe=True, style="cutlass")
    # round 1's best again (noise), then k 64 with the early-fragment pipeline
    for st in (3, 4):
        add(f"2x4 warps of 4x4, k32, {st} st early-frag (r1 best)", **base, warps=(2, 4), frags=(4, 4), kt=2, kin=1,
            stages=st)
    for (wm, wn), (fm, fn) in [((2, 4), (4, 4)), ((2, 2), (4, 4)), ((4, 2), (4, 4)), ((2, 4), (4, 2)),
                               ((4, 4), (2, 4)), ((4, 2), (2, 4))]:
        for st in (3, 4):
            add(f"{wm}x{wn} warps of {fm}x{fn}, k64, {st} st early-frag", **base, warps=(wm, wn), frags=(fm, fn),
                kt=4, kin=1, stages=st)
    for (wm, wn), (fm, fn) in [((2, 4), (4, 4)), ((2, 2), (4, 4))]:
        for st in (3, 4):
            add(f"{wm}x{wn} warps of {fm}x{fn}, k64 (2 per step), {st} st early-frag", **base, warps=(wm, wn),
                frags=(fm, fn), kt=4, kin=2, stages=st)
    for (wm, wn), (fm, fn) in [((2, 2), (4, 4)), ((4, 2), (4, 4))]:
        for st in (3, 4, 5):
            add(f"{wm}x{wn} warps of {fm}x{fn}, k32, {st} st early-frag", **base, warps=(wm, wn), frags=(fm, fn),
                kt=2, kin=1, stages=st)
    add("2x2 warps of 4x4, k128, 3 st early-frag", **base, warps=(2, 2), frags=(4, 4), kt=8, kin=1, stages=3)
    add("2x2 warps of 4x4, k128 (2 per step), 3 st early-frag", **base, warps=(2, 2), frags=(4, 4), kt=8, kin=2,
        stages=3)
    for pad in (16, 24):  # 3 stages: 4 stages of padded 384 x (64 + pad) tiles exceed 227 KB
        b = dict(base, pad=pad)
        add(f"2x4 warps of 4x4, k64, pad{pad}, 3 st early-frag", **b, warps=(2, 4), frags=(4, 4), kt=4, kin=1,
            stages=3)
    # the notebook's steps at k 64: pipelines without / with fragment double buffering
    t64 = dict(warps=(2, 4), frags=(4, 4), kt=4, kin=1, vec=8, pad=8, scope="shared.dyn")
    add("2x4 warps of 4x4, k64, shared.dyn, no pipeline", cfg_async=False, **t64)
    add("2x4 warps of 4x4, k64, 2 st sync", cfg_async=False, **t64, stages=2)
    for st in (2, 3, 4):
        add(f"2x4 warps of 4x4, k64, {st} st async", **t64, stages=st, async_=True)
    add("2x4 warps of 4x4, k64, 3 st async + frag dbuf", **t64, stages=3, async_=True, inner_pipe=True)
    add("2x4 warps of 4x4, k64, 3 st sync early-frag", cfg_async=False, **t64, stages=3, inner_pipe=True,
        style="cutlass")
    # without padding, with the best pipeline (what padding is worth at the end)
    add("2x4 warps of 4x4, k64, pad0, 4 st early-frag", **dict(base, pad=0), warps=(2, 4), frags=(4, 4), kt=4,
        kin=1, stages=4)
    # ldmatrix + mma.sync with the same pipelines
    for kt, st in ((4, 3), (4, 4), (2, 4)):
        V.append((f"mma 2x4 warps of 4x4, k{16 * kt}, {st} st early-frag",
                  lambda M, N, K, kt=kt, st=st: r1.mma(M, N, K, kt=kt, stages=st, async_=True, inner_pipe=True,
                                                       style="cutlass"), True))
    V.append(("dlight MatmulTensorization", r1.dlight_tensorization, False))
    return V


if __name__ == "__main__":
    sys.exit(r1.main(variant_list=variants, title="05_wmma_round2"))
