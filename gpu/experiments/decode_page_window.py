"""What about shuffled pages costs the one-split shapes: the jump to any page of the pool, or only the next 2 MiB?

At 32x8k (1 GB of cache, one split) 12's staged kernel trails SDPA by 1-2% and a bare read of the same bytes by 3%
(`decode_read.py`); `decode_page_order.py` (H100, 344a833, the CUDA-core kernel) put 3 points of it on the
shuffled pages: 0.965 of SDPA shuffled, 0.993 with each sequence's pages in order. A page of the cache is 64 KiB
(K and V of 8 KV heads), and a block reads 8 KiB of it before it jumps to the next page of its sequence, anywhere
in the pool. Two costs could make the jump dear: DRAM (a new row for every 4 KiB) or address translation (the GPU
maps its memory in 2 MiB pages; a block's next page is in another 2 MiB page almost every time, a miss in the SM's
small TLB that the shared TLB serves a few hundred cycles later).

Here the same cache in four pools: shuffled (the sweep's), in order, and shuffled only within windows of 32 pages
(2 MiB: a jump still lands anywhere in DRAM's rows of the window, but on a new translation once in 32 pages) and of
1,024 pages (64 MiB). If translation is the cost, 2 MiB windows run as fast as pages in order; if DRAM rows are,
as slow as shuffled. 12's staged kernel (`plan_one_wave` for 2 an SM) on each, checked against the float64 reference and timed in 9 rounds
alternating with SDPA on the dense keys (SDPA's time over ours [quartiles]).

    python gpu/experiments/decode_page_window.py [BxN ...]    (N in k)
    python gpu/experiments/decode_page_window.py check        (no GPU: each pool holds the same cache)
"""

import sys

import numpy as np

from helpers import decode
from helpers.decode_mma import decode_paged_mma_async

SHAPES = [(32, 8192), (32, 1024), (128, 1024), (8, 32768), (1, 131072)]


def shuffled(kv, table, lengths):
    """The sweep's pool as it is: pages anywhere."""
    return kv, table


def in_windows(pages):
    """A pool maker: the cache with its pages in key order, then shuffled within each run of `pages` slots."""
    def pool(kv, table, lengths):
        kv, table = decode.pages_in_order(kv, table, lengths)
        g, slot = np.random.default_rng(5), np.arange(len(kv))
        for start in range(0, len(kv), pages):
            slot[start:start + pages] = start + g.permutation(min(pages, len(kv) - start))
        moved = np.empty_like(kv)
        moved[slot] = kv  # slot i of the ordered pool goes to slot[i]
        return moved, np.where(table >= 0, slot[np.maximum(table, 0)], -1).astype("int32")
    return pool


POOLS = [("shuffled", shuffled), ("in order", decode.pages_in_order),
         ("shuffled in 2 MiB windows", in_windows(32)), ("shuffled in 64 MiB windows", in_windows(1024))]


def main(shapes):
    from decode_balance import build_planned, cases
    from decode_one_split import against_sdpa

    walk = cases(shapes)
    lesson, dev, target, spec = next(walk)
    for b, n, q, kv, table, lengths, ref, rounds, sdpa in walk:
        ex, splits = build_planned(lesson, decode_paged_mma_async, 2, b, n, spec, target)
        print(f"    {splits} splits; {kv.nbytes / 1e6:,.0f} MB pool", flush=True)
        for name, pool in POOLS:
            args = [q, *pool(kv, table, lengths), lengths, *decode.split_outputs(b, splits)]
            print(f"    {name:27s} " + against_sdpa(ex, dev, args, ref, rounds, sdpa), flush=True)


def check():
    """The reference over each pool is the shuffled pool's, and the windows keep pages within their window."""
    q = decode.queries(3)
    kv, table, lengths = decode.paged_cache([300, 17, 1000])
    ref = decode.reference_paged(q, kv, table, lengths)
    for name, pool in POOLS:
        kv2, table2 = pool(kv, table, lengths)
        err = np.abs(decode.reference_paged(q, kv2, table2, lengths) - ref).max()
        assert err == 0 and kv2.shape == kv.shape, (name, err)
    ordered = decode.pages_in_order(kv, table, lengths)[1]
    windowed = in_windows(32)(kv, table, lengths)[1]
    assert ((ordered // 32 == windowed // 32) | (ordered < 0)).all() and (ordered != windowed).any()
    print(f"{len(POOLS)} pools of {len(kv)} pages, each the same cache; 2 MiB windows keep each page in its window")


if __name__ == "__main__":
    from decode_balance import parse

    if sys.argv[1:2] == ["check"]:
        check()
    else:
        main([parse(a) for a in sys.argv[1:]] or SHAPES)
