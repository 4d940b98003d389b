"""The staged decode kernel with each page's number read before the test on the sequence's length.

A block of 12's staged kernel (`helpers.decode_mma.decode_paged_mma_async`) starts with a chain of loads
from DRAM (L2 is flushed before each timed call): the sequence's length (`tile < tiles` depends on it),
then, inside that test, the page's number from the block table, then the page itself by cp.async. nvcc
does not move a load above the test that guards it, so the first two wait one after the other: two round
trips of DRAM (0.6-1 us each) before the first byte of K. At 1x8k a call takes 25.5 us (H100 record), the
copy of the same bytes 16.3 us; every block pays the chain once.

Here `page_async` reads the page's number first, clamped into the table's row, so that it needs nothing
but the block's own indices: the length and the page number load together, and one round trip is gone.
The copies stay under the length's test (a page past the sequence's end may hold anything). One edit of a
copy of `helpers.decode_mma`; checked against the float64 reference, then timed in 9 rounds alternating
with SDPA (as `decode_mma_async.py`), flushed below 4x L2 as the notebook times.

Result (H100, d857e42, `results/decode_table_first.nvidia-h100.txt`): no gain. SDPA / ours 1x8k 1.064 -> 1.063,
8x1k 1.050 -> 1.052, 1x32k 1.009 -> 1.013, 32x1k 0.999 -> 1.001, 32x8k 0.982 -> 0.981 (135 registers, 145 before).

    python gpu/experiments/decode_table_first.py [BxN ...]    (N in k; default the shapes below 85% of the copy)
    python gpu/experiments/decode_table_first.py build        (no GPU: the CUDA of page_async, and registers)
"""

import inspect
import sys

import helpers
from helpers import decode, decode_mma, kernels
from helpers.decode import HKV, HQ, D
from lesson_code import edited, module_from_source

SHAPES = [(1, 8192), (8, 1024), (1, 32768), (32, 1024), (32, 8192)]

GUARDED = """    if tile < tiles:
        pg = T.alloc_local((1,), "int32")
        pg[0] = table[b, sp * chunk // PAGE + tile]
        if (tile + 1) * PAGE <= n:"""
FIRST = """    pg = T.alloc_local((1,), "int32")
    pg[0] = table[b, T.min(sp * chunk // PAGE + tile, table.shape[1] - 1)]  # before, and without, the length
    if tile < tiles:
        if (tile + 1) * PAGE <= n:"""


def table_first():
    """decode_paged_mma_async whose page_async reads the page number before the length's test."""
    src = edited(inspect.getsource(decode_mma), {GUARDED: FIRST}, "decode_mma")
    return module_from_source("decode_mma_table_first", src).decode_paged_mma_async


VARIANTS = (("staged", decode_mma.decode_paged_mma_async, 2), ("page number first", table_first(), 2))


def build_report():
    """(No GPU.) Each variant at 1x8k: ptxas' registers, and the lines of its CUDA that read the table."""
    b, n = SHAPES[0]
    lesson = helpers.lessons.lesson("12_decoding")
    splits, chunk = lesson.plan_one_wave([n] * b, 132, per_sm=2)
    for name, factory, _ in VARIANTS:
        ex = kernels.build(factory(b, HQ, HKV, D, *decode.pool_size([n] * b), splits, chunk), "sm_90a", "tirx")
        src = ex.mod.imports[0].inspect_source().splitlines()
        reads = [i for i, s in enumerate(src) if "table[" in s][:2]
        regs = ", ".join(f"{r.registers} registers" for r in helpers.ptxas_report(ex, "sm_90a"))
        print(f"{name}: {regs}")
        for i in reads:
            print("   ", "\n    ".join(s.strip()[:110] for s in src[max(0, i - 2):i + 1]))


if __name__ == "__main__":
    from decode_balance import parse
    from decode_mma import main

    if sys.argv[1:2] == ["build"]:
        build_report()
    else:
        main([parse(a) for a in sys.argv[1:]] or SHAPES, VARIANTS)
