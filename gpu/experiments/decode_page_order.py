"""Where notebook 12's paged kernel trails SDPA (32x1k and 32x8k at 0.98 in its record; cuDNN reads
32x8k's GiB at the copy's speed), is it the pages? SDPA reads each head's keys as one contiguous run
(2 MiB at 8k tokens); the paged kernel reads 4 KiB pages (16 keys of one KV head) in the order the
block table gives, and the sweep's cache hands out pages shuffled, as a server's would be after some
steps. DRAM serves long runs of addresses faster than scattered 4 KiB pieces (fewer row switches).

The lesson's kernel (`decode_paged_wave`, `plan_one_wave`) runs on the sweep's shuffled cache, and on
the same keys and values with each sequence's pages side by side in key order
(`helpers.decode.pages_in_order`; since b21677b it keeps the pool's size, the spare pages last; at
344a833 this script's own copy left them out), each checked against the float64 reference and timed
in 9 rounds alternating with torch's SDPA on the same keys laid out densely (flushed and held below
4x L2, else back to back, as the notebook times).

    python gpu/experiments/decode_page_order.py
"""

import helpers
from decode_one_split import against_sdpa, sdpa_case
from decode_plans import setup
from helpers import decode, kernels
from helpers.decode import HKV, HQ, D
from helpers.decode_steps import decode_paged_wave

SHAPES = [(32, 1024), (32, 8192), (128, 1024), (8, 8192), (1, 131072)]


def main():
    plan_one_wave = helpers.lessons.lesson("12_decoding").plan_one_wave
    dev, target, spec, flush_bytes = setup()
    print(f"{spec.name}; decode_paged_wave, plan_one_wave; medians of 9 rounds against SDPA in the same rounds")
    for b, n in SHAPES:
        splits, chunk = plan_one_wave([n] * b, spec.sm_count)
        q, kv, table, lengths, ref, rounds, sdpa, how = sdpa_case(b, n, spec, flush_bytes)
        print(f"  {how}; {splits} splits of {chunk}")
        for name, (cache, rows) in (("pages shuffled", (kv, table)),
                                    ("pages in order", decode.pages_in_order(kv, table, lengths))):
            shape = (b, HQ, HKV, D, *decode.pool_size([n] * b), splits, chunk)
            ex = kernels.build(decode_paged_wave(*shape), target, "tirx")
            args = [q, cache, rows, lengths, *decode.split_outputs(b, splits)]
            print(f"    {name:16s} " + against_sdpa(ex, dev, args, ref, rounds, sdpa), flush=True)


if __name__ == "__main__":
    main()
