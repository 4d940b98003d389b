"""The group's query heads on tensor cores: 12's paged decode kernel with QK^T and PV on mma.sync.

`decode_profile.py` (H200, 2026-11-29) put the lesson's kernel beside cuDNN's SDPA at 32x8k: the same grid
(256 blocks of 128 threads) and occupancy, but 177 M instructions against 37.6 M, issue slots 68% busy
against 18%, DRAM at 83% of peak against 92%. A key costs a warp about 92 instructions: 32 fp32 FMAs of
the 4 heads' scores a lane, the 16-lane shuffle sums of each, 32 FMAs of P V, the conversions of K and V
to fp32. The kernel is bound by issuing instructions, not by its loads; SDPA's warps wait on loads.

Here each warp takes whole pages (16 keys) of the split, pages w, w + 4, ... for warp w of 4:
- S = Q K^T on `mma.sync.m16n8k16`: A is the group's 4 query heads (rows 4-15 zero), B is the page's K,
  loaded from global memory straight into registers. The order of the 128 dims inside a k-step is free
  (a dot product does not care), so a thread loads 16 contiguous bytes of a key and uses them as its
  fragment of two k-steps; Q is loaded in the same order. 16 mma a page.
- The online softmax on the accumulator: a lane holds 2 keys of its head (g = lane / 4) per 8-key tile,
  the 4 lanes of a head share the maximum by 2 shuffles.
- O^T = V^T P^T on mma.sync: P^T (keys x heads) is the score accumulator itself, packed to fp16 pairs;
  V^T comes from V's rows as loaded by `movmatrix.trans` (an 8x8 transpose across the warp's registers,
  PTX ISA 9.7.16.5.17), with the dims again in the loads' order. 8 mma a page.
- The next page's K and V load while this one is scored (as `decode_paged_wave`).
At the end the 4 warps' states (m, l, O) are merged in shared memory; one split writes O, more write
(O_s, LSE_s) for 12's `merge_splits`.

Checked against the float64 reference, then timed in 9 rounds alternating with SDPA, beside the lesson's
`decode_paged_wave`, at the sweep's shapes where the H200 trails SDPA and a few where it does not.

What it found (H200, 2026-11-29, `results/decode_mma*.nvidia-h200.txt`): right at the first build (2e-04,
as the lesson's), and 3.0x fewer instructions at 32x8k (58.4 M against 177.4 M; issue slots 26% busy
against 68%; DRAM at 90.2% of peak against 83%, SDPA's 91.9%: `results/decode_profile.mma.nvidia-h200.txt`).
It holds 218 registers, so 2 blocks an SM: planned for 2 an SM it is ahead of the lesson's kernel or within a
point of it at every sweep shape, and closes most of the one-split gap (SDPA's time over ours, `sweep`):
32x8k 0.897 -> 0.972, 128x1k 0.888 -> 0.959, 32x1k 0.959 -> 0.995, 8x32k 0.949 -> 0.982; planned for 3 an
SM it loses 8-12 points where the plan has more than one split. Neither loading in place (157 registers,
3 an SM) nor two pages ahead in registers (228) reads faster (`ahead`: 0.954-0.966 at 32x8k): with its
warps waiting on loads (long scoreboard 4.6 cycles an instruction, as SDPA's 5.0), what is left is how
many bytes a warp keeps in flight without registers (cp.async or TMA into shared memory, as SDPA does).
The kernel and its macros now live in `helpers/decode_mma.py` (notebook 12's section 7); the `ahead` variants
(loading in place, two sets in place) were run at commit 3d8f513 and retired since.

    python gpu/experiments/decode_mma.py [BxN ...]      (N in k)
    python gpu/experiments/decode_mma.py sweep          (12's sweep shapes: the lesson's and mma at 2 an SM)
    python gpu/experiments/decode_mma.py build          (no GPU: registers, and the mma and movmatrix in the CUDA)
"""

import sys

import helpers
from helpers import decode, decode_steps, kernels
from helpers.decode import HKV, HQ, D
from helpers.decode_mma import decode_paged_mma

SHAPES = [(32, 8192), (128, 1024), (8, 32768), (32, 1024), (8, 8192), (1, 32768)]


def build_report():
    """(No GPU.) ptxas' registers of each kernel at 32x8k, and the mma and movmatrix in its CUDA."""
    import re

    for name, factory in (("lesson (decode_paged_wave)", decode_steps.decode_paged_wave), ("mma", decode_paged_mma)):
        k = factory(32, HQ, HKV, D, *decode.pool_size([8192] * 32), 1, 8192)
        ex = kernels.build(k, "sm_90a", "tirx")
        src = ex.mod.imports[0].inspect_source()
        regs = ", ".join(f"{r.registers} registers, {r.spill_stores} bytes spilled"
                         for r in helpers.ptxas_report(ex, "sm_90a"))
        print(f"{name}: {regs}; mma {len(re.findall('mma.sync', src))}, movmatrix {len(re.findall('movmatrix', src))}")


VARIANTS = (("lesson's", decode_steps.decode_paged_wave, 3), ("mma", decode_paged_mma, 3),
            ("mma, planned for 2 an SM", decode_paged_mma, 2))
SWEEP_VARIANTS = (VARIANTS[0], VARIANTS[2])


def main(shapes, variants=VARIANTS):
    from decode_balance import build_planned, cases
    from decode_one_split import against_sdpa

    walk = cases(shapes)
    lesson, dev, target, spec = next(walk)
    for b, n, q, kv, table, lengths, ref, rounds, sdpa in walk:
        for name, factory, per_sm, *pipeline in variants:  # (name, factory, blocks an SM[, TVM's pipeline])
            ex, splits = build_planned(lesson, factory, per_sm, b, n, spec, target, *pipeline)
            args = [q, kv, table, lengths, *decode.split_outputs(b, splits)]
            print(f"    {name}, {b * HKV * splits} blocks, {splits} splits: "
                  + against_sdpa(ex, dev, args, ref, rounds, sdpa), flush=True)


if __name__ == "__main__":
    from decode_balance import parse

    if sys.argv[1:2] == ["build"]:
        build_report()
    elif sys.argv[1:2] == ["sweep"]:  # 12's sweep: the lesson's kernel and the mma one planned for 2 an SM
        main(decode.sweep_points(), SWEEP_VARIANTS)
    else:
        main([parse(a) for a in sys.argv[1:]] or SHAPES)
