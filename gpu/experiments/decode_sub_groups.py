"""Where one wave leaves a sequence one split (batch 32 and 128), 256 or 1,024 blocks of ~160
registers run 2-3 to an SM, and cuDNN's kernel stays ahead by 2%. A block could serve part of a
group instead: SUB blocks per (sequence, KV head), each scoring HQ / HKV / SUB query heads. Each
reads the whole of K and V, but the SUB blocks of a KV head start together and share it through L2,
so DRAM still sees each key once; with fewer heads a block holds fewer registers, and more blocks
fit an SM (more bytes in flight, no merge).

The variant is made from `decode_paged_wave`'s own source by EDITS. Each, under a one-wave plan for
its blocks an SM, is checked against the float64 reference, then timed in 9 rounds alternating
with SDPA (enable_gqa) on the same keys, as `decode_one_split.py` times them; ptxas' registers are
printed with each.

    python gpu/experiments/decode_sub_groups.py
"""

import inspect
import subprocess

import helpers
from decode_one_split import against_sdpa, sdpa_case
from decode_plans import one_wave, setup
from lesson_code import edited, module_from_source
from helpers import decode, decode_steps, kernels
from helpers.decode import HKV, HQ, D

SHAPES = [(32, 1024), (32, 8192), (128, 1024), (8, 1024)]
HEADER = """from tvm.script import tirx as T
from helpers.decode import check_heads
from helpers.decode_steps import KEYS, load_keys, scores_keys, update_keys
from helpers.lessons.decoding import (LANES, LOG2E, ROWS, THREADS, VEC, init_state, load_q, merge_rows, merge_splits,
                                      share_rows, write_partial)
"""


def sub_group_kernel(sub: int):
    """decode_paged_wave with `sub` blocks per (sequence, KV head), each taking HQ / HKV / sub query heads."""
    src = edited(inspect.getsource(decode_steps.decode_paged_wave), {
        "def decode_paged_wave(": f"def decode_paged_sub{sub}(",
        "heads, scale = check_heads(HQ, HKV, D), ": f"heads, scale = check_heads(HQ, HKV, D) // {sub}, ",
        "b, h, sp = T.cta_id([B, HKV, splits])":
            f"b, hs, sp = T.cta_id([B, HKV * {sub}, splits])\n            h = T.meta_var(hs // {sub})"},
        "decode_paged_wave")
    if src.count("h * heads") != 3:
        raise ValueError("decode_paged_wave's query heads are no longer h * heads in three places")
    src = src.replace("h * heads", "hs * heads")  # the block's first query head; h stays the KV head
    return getattr(module_from_source(f"decode_sub{sub}", HEADER + "\n\n" + src), f"decode_paged_sub{sub}")


def registers(ex) -> str:
    """ptxas' registers a thread of the kernel's first function."""
    src = ex.mod.imports[0].inspect_source()
    with open("/tmp/decode_sub.cu", "w") as f:
        f.write(src)
    out = subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "-Xptxas", "-v", "-o", "/tmp/decode_sub.cubin",
                          "/tmp/decode_sub.cu"], capture_output=True, text=True).stderr
    found = [line.split("Used ")[1].split(" registers")[0] for line in out.splitlines() if "Used " in line]
    return "/".join(found) or "?"


def main():
    cut = helpers.lessons.lesson("12_decoding").cut
    dev, target, spec, flush_bytes = setup()
    variants = [("group of 4 (wave)", decode_steps.decode_paged_wave, 1, 3), ("2 blocks of 2 heads", sub_group_kernel(2), 2, 4),
                ("4 blocks of 1 head", sub_group_kernel(4), 4, 5)]
    print(f"{spec.name}; one wave for each kernel's blocks an SM; medians of 9 rounds against SDPA in the same rounds")
    for b, n in SHAPES:
        q, kv, table, lengths, ref, rounds, sdpa, how = sdpa_case(b, n, spec, flush_bytes)
        print(f"  {how}")
        for name, factory, sub, per_sm in variants:
            splits, chunk = one_wave(per_sm, cut, HKV * sub)(b, n, spec.sm_count)  # blocks of (sequence, sub-group)
            ex = kernels.build(factory(b, HQ, HKV, D, *decode.pool_size([n] * b), splits, chunk), target, "tirx")
            args = [q, kv, table, lengths, *decode.split_outputs(b, splits)]
            print(f"    {name:20s} {registers(ex):>7s} regs, {splits:2d} splits of {chunk:5d}: "
                  + against_sdpa(ex, dev, args, ref, rounds, sdpa), flush=True)


if __name__ == "__main__":
    main()
