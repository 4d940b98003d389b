"""Shuffled pages cost notebook 12's paged kernel 1-3% (`decode_page_order.py`: 32x8k 368.0 us against
356.9 us with the same pages in order, where SDPA takes 355): each step's next page lies anywhere in
the pool, a new DRAM row and likely a TLB miss, and the kernel asks for it only one step (32 keys)
before it scores it. Can it ask earlier without holding more registers? `prefetch.global.L2` brings
a line into L2 (and walks the page table) and returns at once, with nothing to hold.

`prefetch A`: the lesson's last kernel (`decode_paged_wave`) with each thread prefetching, at step i,
one 128-byte line of step i + A's two pages (128 threads: 2 pages x K and V x 32 lines of 4 KiB), on
the sweep's shuffled cache; beside the lesson's kernel on the shuffled cache and on its pages in order
(the target). The kernel is `helpers.decode_steps` edited (`prefetching`); it takes 32 keys a step
(two pages of 16) and keys of 128 halves (two lines), which `prefetching` checks.

    python gpu/experiments/decode_prefetch.py
"""

import inspect

from decode_one_split import compare, shuffled
from decode_page_order import SHAPES, VARIANTS
from helpers import decode, decode_steps
from lesson_code import edited, module_from_source

NEXT = ("                if (i + 1) * ROWS * KEYS < n:\n"
        "                    load_keys(kr, vr, KV, table, b, h, sp * chunk + (i + 1) * ROWS * KEYS, (i + 1) * ROWS * KEYS, n,\n"
        "                              row, lane, page)\n")
PREFETCH = ("                if (i + {a}) * ROWS * KEYS + tid // 64 * page < n:  # a line of step i + {a}'s pages into L2\n"
            "                    T.ptx[\"prefetch.global.L2\"](KV.ptr_to([table[b, (sp * chunk + (i + {a}) * ROWS * KEYS) // page\n"
            "                                                                + tid // 64], tid // 32 % 2, h, tid % 32 // 2,\n"
            "                                                          tid % 2 * 64]))\n")


def prefetching(ahead):
    """decode_paged_wave with an L2 prefetch of step i + ahead's pages at step i, in a module of its own."""
    if decode_steps.ROWS * decode_steps.KEYS != 2 * decode.PAGE or decode.D != 128:
        raise ValueError("the prefetch covers two pages a step and keys of two 128-byte lines")
    src = inspect.getsource(decode_steps)
    start = src.index("def decode_paged_wave(")
    wave = edited(src[start:], {NEXT: NEXT + PREFETCH.format(a=ahead)}, "decode_paged_wave")
    return module_from_source(f"decode_prefetch{ahead}", src[:start] + wave).decode_paged_wave


if __name__ == "__main__":
    compare(VARIANTS[:1] + [(f"prefetch {a}", prefetching(a), shuffled) for a in (2, 4)] + VARIANTS[1:], SHAPES)
