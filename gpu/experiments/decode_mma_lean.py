"""Fewer instructions around 12's tensor-core kernels: each page's number loaded once, whole pages copied
without a test a copy, and a row's K and V loaded together.

`decode_profile.py` (H200, 2026-11-29, 32x8k): `decode_paged_mma_async` executed 74.2 M instructions, cuDNN's
SDPA 37.6 M, and SDPA read 3 points closer to DRAM's peak (94.4% against 91.2%). The SASS of its page loop
(nvcc -arch sm_90a, cuobjdump) showed where a page's instructions went besides its 24 HMMA and 16 LDSM: each of
a lane's 16 cp.async re-read the page's number from the block table (16 LDG a page) and re-tested the key
against the split's end, because an `asm volatile` with a memory clobber (TVM's cp.async helper) keeps the
compiler from reusing a load across it. `page_async_lean` loaded the page's number into a register once and,
where the page is whole (all but the split's last), issued the 16 copies untested. The register kernel: at
c9edbbe it loaded a row's K and V under one test from one table read (458 SASS instructions in its page loop,
58.4 M executed at 32x8k); from b60209e its `page_into` loaded K, then V, each with its own tests (553, 70.8 M);
`page_into_joint` loaded them together again (369).

Run at 9bfa54d on the H100 (`results/decode_mma_lean.nvidia-h100.txt`), each variant was the lesson's kernel
with one macro swapped while its prim_func was parsed: the joint load was level with or ahead of the split one at
all six shapes (32x8k 0.999 [0.992-1.002] of SDPA against 0.981), the lean copy ahead of the staged one at all six
(0.958 -> 0.991 at 32x8k; 1.020 [1.015-1.022] at 8x8k). Both then became `helpers.decode_mma`'s `page_into` and
`page_async`, byte for byte the CUDA measured (run again at d3e8bfd: `results/decode_mma_lean.landed.nvidia-h100.txt`).
Both runs came from this script's timing mode at those commits; what stays here is the count of each page
loop's instructions, and `decode_mma_async.py` times the same kernels against SDPA.

    python gpu/experiments/decode_mma_lean.py build         (no GPU: SASS instructions in each page loop)
"""

import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from helpers import decode, decode_mma, kernels
from helpers.decode import HKV, HQ, D


def loop_counts(kernel):
    """(instructions, Counter of opcodes) of the page loop in the kernel's SASS for sm_90a: the shortest loop
    that holds both the mma and the page's loads, cp.async or plain (every path through it, taken or not)."""
    src = kernels.build(kernel, "sm_90a", "tirx").mod.imports[0].inspect_source()
    with tempfile.TemporaryDirectory() as tmp:
        cu, cubin = Path(tmp, "k.cu"), Path(tmp, "k.cubin")
        cu.write_text(src)
        subprocess.run(["nvcc", "-cubin", "-arch", "sm_90a", "-w", "-o", str(cubin), str(cu)], check=True)
        sass = subprocess.run(["cuobjdump", "-sass", str(cubin)], check=True, capture_output=True, text=True).stdout
    ins = [(int(m[1], 16), m[3], m[4]) for m in
           re.finditer(r"/\*([0-9a-f]{4})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)\s*([^;]*);", sass)]
    loops = [(int(t[1], 16), a) for a, op, args in ins if op.startswith("BRA")
             for t in [re.search(r"0x([0-9a-f]+)", args)] if t and int(t[1], 16) < a]
    bodies = [[op.split(".")[0] for a, op, _ in ins if first <= a <= last] for first, last in loops]
    body = min((b for b in bodies if "HMMA" in b and ("LDGSTS" in b or "LDG" in b)), key=len)  # mma and loads
    return len(body), Counter(body)


def build_report():
    """(No GPU; nvcc and cuobjdump on the PATH.) The page loop of each kernel at 32x8k, one split."""
    shape = (32, HQ, HKV, D, *decode.pool_size([8192] * 32), 1, 8192)
    for name, factory in (("staged", decode_mma.decode_paged_mma_async), ("registers", decode_mma.decode_paged_mma)):
        count, ops = loop_counts(factory(*shape))
        top = ", ".join(f"{op} {n}" for op, n in ops.most_common(12))
        print(f"{name}: {count} instructions in the page loop (every path); LDG {ops['LDG']}; {top}")


if __name__ == "__main__":
    if sys.argv[1:] != ["build"]:
        sys.exit("usage: python gpu/experiments/decode_mma_lean.py build   (timings: decode_mma_async.py)")
    build_report()
