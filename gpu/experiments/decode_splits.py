"""On the H200 notebook 12's paged kernel falls 7-9% behind SDPA where `plan_one_wave` leaves one split
(32x8k: 256 blocks for 3 x 132 places; 128x1k: 1,024 blocks), with its pages in order as much as shuffled
(`results/decode_prefetch.nvidia-h200.txt`). Faster memory needs more bytes in flight an SM (notebook 00's
Little's law: bytes in flight = bandwidth x latency), and the plan counts only SMs. Two ways to more:
more splits of each sequence (more blocks, each walking fewer keys, then the merge), or more keys a row a
step (`decode_one_split.keys_a_row(8)`: twice the bytes a thread, but 2 blocks an SM, not 3).

The lesson's last kernel (`decode_paged_wave`) at the plan's splits and at 2, 3 and 4 times as many (chunks
of whole pages), and with 8 keys a row at the plan's splits; each checked against the float64 reference and
timed in 9 rounds alternating with SDPA on the same keys, as `decode_one_split.compare` (SDPA's time over
ours [quartiles]).

`keys`: 4 keys a row (the lesson's) against 8 at the plan's splits, at the sweep's other shapes, where the
plan leaves several splits (and with 8 keys only 2 of its 3 blocks an SM fit).

    python gpu/experiments/decode_splits.py [keys]
"""

import sys

import helpers
from decode_one_split import against_sdpa, keys_a_row, sdpa_case
from decode_plans import setup
from helpers import decode, decode_steps, kernels
from helpers.decode import HKV, HQ, D

SHAPES = [(32, 8192), (128, 1024), (32, 1024)]
SPLIT_SHAPES = [(8, 1024), (8, 8192), (1, 8192), (1, 131072)]


def main(keys_only=False):
    plan_one_wave = helpers.lessons.lesson("12_decoding").plan_one_wave
    dev, target, spec, flush_bytes = setup()
    print(f"{spec.name}, {spec.sm_count} SMs; medians of 9 rounds against SDPA in the same rounds")
    for b, n in SPLIT_SHAPES if keys_only else SHAPES:
        planned, chunk = plan_one_wave([n] * b, spec.sm_count)
        q, kv, table, lengths, ref, rounds, sdpa, how = sdpa_case(b, n, spec, flush_bytes)
        print(f"  {how}; the plan: {planned} splits of {chunk}")
        runs = []
        for times in () if keys_only else (1, 2, 3, 4):
            cut = -(-n // (planned * times) // decode.PAGE) * decode.PAGE  # whole pages
            runs.append((f"{-(-n // cut)} splits of {cut}", decode_steps.decode_paged_wave, -(-n // cut), cut))
        if keys_only:
            runs.append((f"{planned} splits, 4 keys a row", decode_steps.decode_paged_wave, planned, chunk))
        runs.append((f"{planned} splits, 8 keys a row", keys_a_row(8), planned, chunk))
        for name, factory, splits, per_split in runs:
            ex = kernels.build(factory(b, HQ, HKV, D, *decode.pool_size([n] * b), splits, per_split), target, "tirx")
            args = [q, kv, table, lengths, *decode.split_outputs(b, splits)]
            print(f"    {name:26s} " + against_sdpa(ex, dev, args, ref, rounds, sdpa), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:2] == ["keys"])
