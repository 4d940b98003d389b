"""The one-split gap with an L2 prefetch of the pages beyond the ring: `decode_prefetch.py` again, on 12's staged kernel.

Where `plan_one_wave` leaves one split (32x1k, 32x8k, 128x1k on the H100), a block walks its sequence's whole run of
shuffled pages and 12's staged kernel stays 0-2% behind SDPA, which reads dense keys (sweep record d3e8bfd: 32x8k
0.980, 32x1k 0.993; `decode_read.py`: a bare read of the same bytes 3% faster than ours at 32x8k). On the CUDA-core
kernel that came before, an L2 prefetch two steps ahead took that gap away at one split (H100, 5118154,
`decode_prefetch.txt`: 32x8k 0.976 -> 1.010 [1.003-1.014], 32x1k 0.978 -> 0.996, as fast as pages in order) and
cost 2-5% where splits are short (its first prefetches wasted). The staged kernel keeps two pages a warp in flight
by cp.async; here each warp also prefetches into L2 the page `ahead` steps past those two (K and V, 64 lines of
128 bytes: two `prefetch.global.L2` a lane, no registers held), only where the plan leaves one split, so
the kernels of other plans are byte for byte the lesson's.

Each variant is checked against the float64 reference and timed in 9 rounds alternating with SDPA on the dense keys
(`decode_mma.main`: SDPA's time over ours [quartiles]).

    python gpu/experiments/decode_prefetch_staged.py [BxN ...]     (N in k; default the one-split shapes)
    python gpu/experiments/decode_prefetch_staged.py build         (no GPU: registers, the prefetch lines)
"""

import inspect
import sys

import helpers
from helpers import decode, decode_mma, kernels
from helpers.decode import HKV, HQ, D
from lesson_code import edited, module_from_source

SHAPES = [(32, 8192), (32, 1024), (128, 1024), (64, 8192)]
RING = "                page_async((it + STAGES - 1) * WARPS + warp, (it + STAGES - 1) % STAGES)\n"
PREFETCH = ("                if splits == 1:  # a block walks the whole sequence: a page beyond the ring into L2\n"
            "                    prefetch_page((it + STAGES - 1 + {a}) * WARPS + warp)\n")
MACRO = '''@T.macro(hygienic=False)
def prefetch_page(tile):
    # page `tile` of the warp's split, K and V (two 4 KiB runs of 32 lines), into L2: a line each a lane
    if tile < tiles:
        for which in T.unroll(2):
            T.ptx["prefetch.global.L2"](KV.ptr_to([table[b, sp * chunk // PAGE + tile], which, h, lane // 2,
                                                  lane % 2 * 64]))


'''


def prefetching(ahead):
    """decode_paged_mma_async with, at one split, an L2 prefetch of the warp's page `ahead` steps past its ring."""
    if decode.PAGE * decode.D * 2 != 32 * 128 or decode_mma.THREADS != 128:
        raise ValueError("the prefetch takes a page's K (or V) as 32 lines of 128 bytes, a line a lane")
    src = edited(inspect.getsource(decode_mma), {RING: RING + PREFETCH.format(a=ahead),
                                                 "\ndef decode_paged_mma_async(": "\n" + MACRO + "def decode_paged_mma_async("},
                 "decode_mma")
    return module_from_source(f"decode_mma_prefetch{ahead}", src).decode_paged_mma_async


VARIANTS = (("staged", decode_mma.decode_paged_mma_async, 2), ("prefetch 1 past the ring", prefetching(1), 2),
            ("prefetch 2 past the ring", prefetching(2), 2))


def build_report():
    """(No GPU.) Each variant at 32x8k (one split) and 8x8k (several): registers, and prefetch lines in the CUDA."""
    for name, factory, _ in VARIANTS:
        for b, n, splits in ((32, 8192, 1), (8, 8192, 4)):
            k = factory(b, HQ, HKV, D, *decode.pool_size([n] * b), splits, -(-n // splits // 16) * 16)
            ex = kernels.build(k, "sm_90a", "tirx")
            src = ex.mod.imports[0].inspect_source()
            regs = ", ".join(f"{r.registers}" for r in helpers.ptxas_report(ex, "sm_90a"))
            print(f"{name}, {b}x{n // 1024}k, {splits} splits: registers {regs}; "
                  f"prefetch lines {src.count('prefetch.global.L2')}")


if __name__ == "__main__":
    from decode_balance import parse
    from decode_mma import main

    if sys.argv[1:2] == ["build"]:
        build_report()
    else:
        main([parse(a) for a in sys.argv[1:]] or SHAPES, VARIANTS)
