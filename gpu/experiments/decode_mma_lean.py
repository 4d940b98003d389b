"""Fewer instructions around 12's staged tensor-core kernel: each page's number loaded once, and whole pages
copied without a test a copy.

`decode_profile.py` (H200, 2026-11-29, 32x8k): `decode_paged_mma_async` executes 74.2 M instructions, cuDNN's
SDPA 37.6 M, and SDPA reads 3 points closer to DRAM's peak (94.4% against 91.2%). The SASS of its page loop
(nvcc -arch sm_90a, cuobjdump) shows where a page's instructions go besides its 24 HMMA and 16 LDSM: each of a
lane's 16 cp.async re-reads the page's number from the block table (16 LDG a page) and re-tests the key
against the split's end, because an `asm volatile` with a memory clobber (TVM's cp.async helper) keeps the
compiler from reusing a load across it. Here `page_async_lean` loads the page's number into a register once
and, where the page is whole (all but the split's last), issues the 16 copies untested.

The kernel is `helpers.decode_mma.decode_paged_mma_async` with its `page_async` swapped for
`page_async_lean` while the prim_func is parsed (TVMScript resolves a macro's name at parse time), so that
everything else is the lesson's kernel, byte for byte. The same for the register kernel: at c9edbbe it loaded a
row's K and V under one test from one table read (458 SASS instructions in its page loop, 58.4 M executed at
32x8k); since b60209e `page_into` loads K, then V, each with its own tests (553, 70.8 M). `page_into_joint`
brings the joint load back into `helpers.decode_mma.decode_paged_mma`.

    python gpu/experiments/decode_mma_lean.py [BxN ...]     (N in k: the lesson's kernels and these)
    python gpu/experiments/decode_mma_lean.py build         (no GPU: SASS instructions in each page loop)
"""

import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from tvm.script import tirx as T

from helpers import decode, decode_mma, decode_steps, kernels
from helpers.decode import HKV, HQ, D
from helpers.decode_mma import PAGE


@T.macro(hygienic=False)
def page_async_lean(tile, st):
    # decode_mma's page_async with the page's number in a register and whole pages copied untested
    if tile < tiles:
        pg = T.alloc_local((1,), "int32")
        pg[0] = table[b, sp * chunk // PAGE + tile]
        if (tile + 1) * PAGE <= n:
            for i in T.unroll(8):
                r, c = T.meta_var(i * 2 + lane // 16), T.meta_var(lane % 16)
                for which in T.unroll(2):
                    T.ptx["cp.async.cg.shared.global"](KVs.ptr_to([warp, st, which, r, (c ^ r % 8) * 8]),
                                                       KV.ptr_to([pg[0], which, h, r, c * 8]), 16)
        else:
            for i in T.unroll(8):
                r, c = T.meta_var(i * 2 + lane // 16), T.meta_var(lane % 16)
                for which in T.unroll(2):
                    if tile * PAGE + r < n:
                        T.ptx["cp.async.cg.shared.global"](KVs.ptr_to([warp, st, which, r, (c ^ r % 8) * 8]),
                                                           KV.ptr_to([pg[0], which, h, r, c * 8]), 16)
                    else:
                        KVs[warp, st, which, r, T.Ramp((c ^ r % 8) * 8, 1, 8)] = T.Broadcast(T.float16(0), 8)
    T.ptx["cp.async.commit_group"]()  # an empty group past the last page keeps the count


@T.macro(hygienic=False)
def page_async_whole(tile, st):
    # (for counting only, wrong on a split's last page) page_async_lean's path for a whole page alone
    if tile < tiles:
        pg = T.alloc_local((1,), "int32")
        pg[0] = table[b, sp * chunk // PAGE + tile]
        for i in T.unroll(8):
            r, c = T.meta_var(i * 2 + lane // 16), T.meta_var(lane % 16)
            for which in T.unroll(2):
                T.ptx["cp.async.cg.shared.global"](KVs.ptr_to([warp, st, which, r, (c ^ r % 8) * 8]),
                                                   KV.ptr_to([pg[0], which, h, r, c * 8]), 16)
    T.ptx["cp.async.commit_group"]()


def parsed_with(factory, name, macro):
    """helpers' kernel `factory` parsed with `macro` in place of decode_mma's macro `name` (TVMScript resolves a
    macro's name when the prim_func is parsed, so everything else stays the lesson's kernel)."""
    def parsed(*shape):
        lesson_macro = getattr(decode_mma, name)
        setattr(decode_mma, name, macro)
        try:
            return factory(*shape)
        finally:
            setattr(decode_mma, name, lesson_macro)
    return parsed


decode_paged_mma_lean = parsed_with(decode_mma.decode_paged_mma_async, "page_async", page_async_lean)
decode_paged_mma_whole = parsed_with(decode_mma.decode_paged_mma_async, "page_async", page_async_whole)  # counting only


@T.macro(hygienic=False)
def page_into_joint(kb, vb, tile):
    # decode_mma's page_into with a row's K and V loaded under one test, from one table read (as at c9edbbe)
    if tile < tiles:
        pg = T.alloc_local((1,), "int32")
        pg[0] = table[b, sp * chunk // PAGE + tile]
        for ri in T.unroll(2):
            for u in T.unroll(4):
                if tile * PAGE + ri * 8 + g < n:
                    kb[T.Ramp(ri * 16 + u * 4, 1, 4)] = KV32[pg[0], 0, h, ri * 8 + g, T.Ramp(u * 16 + t * 4, 1, 4)]
                    vb[T.Ramp(ri * 16 + u * 4, 1, 4)] = KV32[pg[0], 1, h, ri * 8 + g, T.Ramp(u * 16 + t * 4, 1, 4)]
                else:  # past the split's end: zeros, so that P V adds 0 * 0
                    for q in T.unroll(4):
                        kb[ri * 16 + u * 4 + q] = T.uint32(0)
                        vb[ri * 16 + u * 4 + q] = T.uint32(0)


decode_paged_mma_joint = parsed_with(decode_mma.decode_paged_mma, "page_into", page_into_joint)


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
    for name, factory in (("staged (lesson)", decode_mma.decode_paged_mma_async), ("lean", decode_paged_mma_lean),
                          ("lean, the whole-page path alone", decode_paged_mma_whole),
                          ("registers (lesson)", decode_mma.decode_paged_mma), ("registers, K and V together",
                                                                                decode_paged_mma_joint)):
        count, ops = loop_counts(factory(*shape))
        top = ", ".join(f"{op} {n}" for op, n in ops.most_common(12))
        print(f"{name}: {count} instructions in the page loop (every path); LDG {ops['LDG']}; {top}")


VARIANTS = (("lesson's", decode_steps.decode_paged_wave, 3), ("registers", decode_mma.decode_paged_mma, 2),
            ("registers, K and V together", decode_paged_mma_joint, 2),
            ("staged", decode_mma.decode_paged_mma_async, 2),
            ("lean", decode_paged_mma_lean, 2))

if __name__ == "__main__":
    from decode_balance import parse
    from decode_mma import SHAPES, main

    if sys.argv[1:2] == ["build"]:
        build_report()
    else:
        main([parse(a) for a in sys.argv[1:]] or SHAPES, VARIANTS)
