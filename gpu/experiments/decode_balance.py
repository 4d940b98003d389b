"""Is it how the blocks fall on the SMs? The H200's one-split shapes, and their neighbours by a few sequences.

Where `plan_one_wave` leaves one split, 12's paged kernel trails SDPA on the H200 by 4-10% (32x8k, 128x1k:
`decode_pairs.py`), and neither more bytes in flight a thread (8 keys a row) nor cp.async stages close it
(`decode_staged.py`). What is left is how the blocks, one a (sequence, KV head), fall on the 132 SMs: at
32x8k 256 blocks give 124 SMs two and 8 SMs one, at 128x1k 1,024 blocks are 2.6 waves of 3 an SM. If
that is the cost, a batch that fills the SMs evenly should level with SDPA: 33x8k (264 blocks, 2 an SM),
49x8k (392, nearly 3 an SM), 66x8k (528, 4 an SM), 99x1k (792, 6 an SM) and 132x1k (1,056, 8 an SM), beside
the sweep's 32x8k, 64x8k and 128x1k. Each shape runs the lesson's kernel (4 keys a row, 3 blocks an SM) and
the 8-key one (2 blocks an SM), planned by `plan_one_wave`, checked against the float64 reference and timed
in 9 rounds alternating with SDPA on the same keys (SDPA's time over ours [quartiles]), with
the size of the cache each reads.

What it found (H200, 2026-11-29, `results/decode_balance.nvidia-h200.txt`): not the spread. 33x8k, two
blocks on every SM, trails as 32x8k does (0.934 against 0.909); 49x8k, three an SM, leads (1.020). An SM
needs three of these blocks to pull its share (2 read about 31 GB/s an SM, 3 about 33, a lone block 18),
so a wave of fewer, as 32x8k's only one and 64x8k's second (0.805), leaves bandwidth unused.

    python gpu/experiments/decode_balance.py [BxN ...]     (N in k: 33x8 is 33 sequences of 8,192 tokens)
"""

import sys

import helpers
from decode_one_split import against_sdpa, sdpa_case
from decode_pairs import PAIRS
from decode_plans import setup
from helpers import decode, kernels
from helpers.decode import HKV, HQ, D

SHAPES = [(32, 8192), (33, 8192), (49, 8192), (64, 8192), (66, 8192), (99, 1024), (128, 1024), (132, 1024)]


def cases(shapes):
    """12's lesson, this GPU (device, target, spec), then for each (b, n) of `shapes`, after a line saying how
    and the cache's size: b, n and `sdpa_case`'s query, cache, reference and round timers."""
    lesson = helpers.lessons.lesson("12_decoding")
    dev, target, spec, flush_bytes = setup()
    print(f"{spec.name}, {spec.sm_count} SMs; medians of 9 rounds against SDPA in the same rounds")
    yield lesson, dev, target, spec
    for b, n in shapes:
        q, kv, table, lengths, ref, rounds, sdpa, how = sdpa_case(b, n, spec, flush_bytes)
        print(f"  {how}; {decode.decode_bytes(lengths) / 1e6:,.0f} MB of cache")
        yield b, n, q, kv, table, lengths, ref, rounds, sdpa


def build_planned(lesson, factory, per_sm, b, n, spec, target, pipeline="tirx"):
    """`factory`'s kernel for b sequences of n keys, planned by the lesson's `plan_one_wave` for `per_sm`
    blocks an SM, built by TVM's `pipeline`: (executable, splits)."""
    splits, chunk = lesson.plan_one_wave([n] * b, spec.sm_count, per_sm=per_sm)
    return kernels.build(factory(b, HQ, HKV, D, *decode.pool_size([n] * b), splits, chunk), target, pipeline), splits


def main(shapes):
    walk = cases(shapes)
    lesson, dev, target, spec = next(walk)
    for b, n, q, kv, table, lengths, ref, rounds, sdpa in walk:
        for keys, per_sm, factory in PAIRS:
            ex, splits = build_planned(lesson, factory, per_sm, b, n, spec, target)
            blocks = b * HKV * splits
            args = [q, kv, table, lengths, *decode.split_outputs(b, splits)]
            print(f"    {keys} keys, {per_sm}/SM: {blocks:5d} blocks ({blocks / spec.sm_count:4.2f} an SM), "
                  f"{splits} splits: " + against_sdpa(ex, dev, args, ref, rounds, sdpa), flush=True)


def parse(arg):
    b, n = arg.lower().rstrip("k").split("x")
    return int(b), int(n) * 1024


if __name__ == "__main__":
    main([parse(a) for a in sys.argv[1:]] or SHAPES)
