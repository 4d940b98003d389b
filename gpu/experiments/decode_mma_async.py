"""`decode_mma.py`'s kernel with its pages in flight in shared memory, not in registers: cp.async, 3 stages a warp.

`decode_mma.py` (H200, 2026-11-29) put the group's query heads on mma.sync and cut the lesson's instructions
3x, but at the one-split shapes it still trails SDPA by 3-4% (32x8k 0.97, 128x1k 0.96). Its warps wait on
loads, as SDPA's do, and more pages ahead in registers did not help (228 registers, 2 blocks an SM). SDPA
(cuDNN's sdpa_sm80_flash_fprop) copies K and V with cp.async into 85 KB of shared memory a block: bytes in
flight that hold no registers.

Here each warp keeps a ring of 3 page stages (K and V, 8 KiB a page) in shared memory, filled by cp.async
(`cp.async.cg`, 16 bytes a copy, PTX ISA 9.7.9.25), two pages ahead of the one it scores. The fragments come
from shared memory by ldmatrix, as in notebook 10: K's rows as mma's B for S = Q K^T, and V's rows by
`ldmatrix.trans` as V^T's A fragments for O^T = V^T P^T (no movmatrix); each row's 16-byte chunks are stored
XOR-swizzled (chunk c of row r at c ^ r % 8), so the 8 rows of an 8x8 matrix fall on distinct banks. A
warp's stages are its own: it waits for its own groups (`cp.async.wait_group`), then `__syncwarp`.
Q, the softmax on the accumulator and the warps' merge are `decode_mma.py`'s. The kernel now lives in
`helpers/decode_mma.py` (notebook 12's section 7), with the warps' merge buffer in the stages' memory
(98.5 KB a block, which sm_86 and sm_89 allow); the first run above had it apart (115 KB).

    python gpu/experiments/decode_mma_async.py [BxN ...]      (N in k)
    python gpu/experiments/decode_mma_async.py sweep          (12's sweep shapes)
    python gpu/experiments/decode_mma_async.py build          (no GPU: registers and shared memory)
"""

import sys

import helpers
from decode_mma import SHAPES
from helpers import decode, decode_steps, kernels
from helpers.decode import HKV, HQ, D
from helpers.decode_mma import PAGE, STAGES, WARPS, decode_paged_mma, decode_paged_mma_async


VARIANTS = (("lesson's", decode_steps.decode_paged_wave, 3), ("mma, planned for 2 an SM", decode_paged_mma, 2),
            ("mma, cp.async, planned for 2 an SM", decode_paged_mma_async, 2))


def build_report():
    """(No GPU.) ptxas' registers and the shared memory of the kernel at 32x8k."""
    k = decode_paged_mma_async(32, HQ, HKV, D, *decode.pool_size([8192] * 32), 1, 8192)
    for r in helpers.ptxas_report(kernels.build(k, "sm_90a", "tirx"), "sm_90a"):
        print(f"{r.registers} registers, {r.spill_stores} bytes spilled; "
              f"{WARPS * STAGES * 2 * PAGE * D * 2 // 1024} KiB of stages a block")


if __name__ == "__main__":
    from decode_balance import parse
    from decode_mma import main

    if sys.argv[1:2] == ["build"]:
        build_report()
    elif sys.argv[1:2] == ["sweep"]:  # 12's sweep shapes: the lesson's, mma in registers, mma staged
        main(decode.sweep_points(), VARIANTS)
    else:
        main([parse(a) for a in sys.argv[1:]] or SHAPES, VARIANTS)
