"""Without the mask 11's sweep always has 4,096 items (32k tokens x 16 heads / 128 rows): on 132 SMs
that is 31 turns and 4 items over, so in the last turn 4 SMs work and 128 wait, about 1/32 of the
kernel's time, at every length. Is that tail what keeps d = 128, 16k under 650 TFLOP/s?

The persistent kernel of 11's sweep (hopper_softmax(0) at d = 128) at 16,384 tokens (4,096 items: 31
turns and a tail of 4), at 16,896 (4,224 items: 32 whole turns, 3% more keys an item), and at 16,384 on
128 blocks (32 whole turns, 4 SMs idle throughout). Each checked against the float64 reference and
timed in rounds alternating with cuDNN.

    python gpu/experiments/tail_turns.py
"""

import helpers
from helpers import flash_hopper_persistent as walk
from helpers.attention import qkv
from helpers.attention_sweep import HEADS
from helpers.flash_hopper_softmax import hopper_softmax, with_softmax

from exp_poly import best, cudnn, timed

D = 128


def on_blocks(blocks):
    return lambda bh, n, d, causal: with_softmax(hopper_softmax(0), walk.persistent_flash_attention, bh, n, d,
                                                 causal, blocks)


def main():
    nb = helpers.start("11_flash_attention_hopper")
    sms = nb.spec.sm_count
    print(f"{nb.spec.name}: TFLOP/s and cuDNN's time over ours (median [quartiles] of rounds)")
    for b, n, columns in [(2, 16384, [("one per SM", best()), ("128 blocks", on_blocks(128))]),
                          (2, 16896, [("one per SM", best())])]:
        shape = (b, HEADS, n, D)
        items = b * HEADS * n // walk.BR_H
        q, k, v = qkv(*shape, True)
        base = cudnn(nb, shape, False, q, k, v)
        print(f"  {b}x{HEADS}x{n}x{D}, {items} items = {items / sms:.2f} turns on {sms} SMs | "
              + " | ".join(timed(nb, label, build, shape, False, base, q, k, v) for label, build in columns),
              flush=True)


if __name__ == "__main__":
    main()
