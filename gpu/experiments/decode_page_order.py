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

from decode_one_split import compare, shuffled
from helpers import decode
from helpers.decode_steps import decode_paged_wave

SHAPES = [(32, 1024), (32, 8192), (128, 1024), (8, 8192), (1, 131072)]
VARIANTS = [("pages shuffled", decode_paged_wave, shuffled), ("pages in order", decode_paged_wave, decode.pages_in_order)]


if __name__ == "__main__":
    compare(VARIANTS, SHAPES)
