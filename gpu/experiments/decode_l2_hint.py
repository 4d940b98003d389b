"""The staged decode kernel's cp.async with an L2 prefetch-size hint (PTX ISA 9.7.9.25: `.L2::128B`, `.L2::256B`).

At 32x8k, 12's staged kernel (`helpers.decode_mma.decode_paged_mma_async`) reads DRAM at 91.3% of its peak where
SDPA's `sdpa_sm80_flash_fprop` reads 93.7% (`results/decode_profile.landed.nvidia-h100.txt`), and issues fewer
instructions than SDPA: both wait on memory. FlashAttention's copies (CUTLASS's `SM80_CP_ASYNC_CACHEGLOBAL`) are
`cp.async.cg.shared.global.L2::128B`; ours carry no hint. The hint lets L2 fetch the whole 128 or 256 bytes
around a 16-byte request from DRAM at once; a warp's 32 copies already cover 512 contiguous bytes, so the
question is only whether DRAM serves those bursts better when told.

Each variant is `helpers.decode_mma` with one word of `copy_chunk` changed, in a module of its own; checked
against the float64 reference, then timed in 9 rounds alternating with SDPA (as `decode_mma_async.py`).
Result (H100, d621ffa, `results/decode_l2_hint.nvidia-h100.txt`): no gain. 32x8k 0.995 / 0.993 / 0.983 of SDPA
(no hint / 128B / 256B), 32x1k 0.999 / 0.999 / 0.997: the hint is not what the staged kernel lacks.

    python gpu/experiments/decode_l2_hint.py [BxN ...]      (N in k; default the shapes behind or level on the H100)
    python gpu/experiments/decode_l2_hint.py build          (no GPU: the hint in the CUDA, and ptxas' registers)
"""

import inspect
import sys

import helpers
from helpers import decode, decode_mma, kernels
from helpers.decode import HKV, HQ, D
from lesson_code import edited, module_from_source

SHAPES = [(32, 8192), (32, 1024), (8, 32768), (1, 32768), (1, 8192), (8, 1024)]
COPY = 'T.ptx["cp.async.cg.shared.global"]'


def with_hint(hint):
    """decode_paged_mma_async whose cp.async carries `.L2::<hint>` (a copy of helpers.decode_mma)."""
    src = edited(inspect.getsource(decode_mma), {COPY: COPY.replace('global"', f'global.L2::{hint}"')}, "decode_mma")
    return module_from_source(f"decode_mma_l2_{hint.lower()}", src).decode_paged_mma_async


VARIANTS = (("staged (no hint)", decode_mma.decode_paged_mma_async, 2), ("L2::128B", with_hint("128B"), 2),
            ("L2::256B", with_hint("256B"), 2))


def build_report():
    """(No GPU.) Each variant at 32x8k: its cp.async line in the CUDA, and ptxas' registers."""
    for name, factory, _ in VARIANTS:
        ex = kernels.build(factory(32, HQ, HKV, D, *decode.pool_size([8192] * 32), 1, 8192), "sm_90a", "tirx")
        line = next(s.strip() for s in ex.mod.imports[0].inspect_source().splitlines() if "cp.async.cg" in s)
        regs = ", ".join(f"{r.registers} registers" for r in helpers.ptxas_report(ex, "sm_90a"))
        print(f"{name}: {regs}; {line[:100]}")


if __name__ == "__main__":
    from decode_balance import parse
    from decode_mma import main

    if sys.argv[1:2] == ["build"]:
        build_report()
    else:
        main([parse(a) for a in sys.argv[1:]] or SHAPES, VARIANTS)
