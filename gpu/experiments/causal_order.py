"""Notebook 11's causal sweep launches a block per work item (128 rows of one head), each head's
items longest first, and behind cuDNN at short sequences (0.69 at 512 tokens). Where work items
differ in length, the order they are handed out decides how evenly the SMs finish. Orders tried,
with `persistent_flash_attention`'s own `work_item` hook (the kernel code is the lesson's):

- "per head, a block each": the notebook's (head by head, in each the longest row block first);
- "longest first, a block each": every head's longest row block, then every head's next, ... (one
  group of all the heads, `in_groups(bh, bh)`): the hardware hands blocks out in order as SMs free
  up, so this is longest-processing-time-first;
- "per head, persistent" and "longest first, persistent": the same orders walked by one block per SM;
- "by G heads, persistent": heads in groups of G (their K and V together in L2), longest first in each
  (the lesson's `in_groups`); with `items`, G heads of a group hold 64-512 items in all.

Each is checked against the float64 reference and timed in rounds alternating with cuDNN (torch's
SDPA, CUDNN_ATTENTION), as the notebook's sweep times them. 32k tokens a batch, 16 heads, fp16.

`walks` (2026-12-07, H100: causal 512 d=128 was behind cuDNN at 0.95 with 11's sweep's groups of 16,
chosen on an H200) times every order with the sweep's softmax (`exp_poly.sweep_softmax`) on the streamed
walk, at d=128 and 512 and 1k tokens (or the lengths given), and groups of 4 and 64 heads besides.
Result (H100, `results/causal_order.walks*.txt`): groups of 4 heads fastest at 512, 1k and 2k (1.04, 1.14,
1.13 of cuDNN; 16 heads 0.92, 0.94, 1.12), so 11's sweep groups 4 heads at d=128 (`walk.causal_group`).
`walks d64 512 1024` (H100, `results/causal_order.walks-d64.txt`): at d=64 no group size wins at both
lengths: 16 heads at 512 (1.125 [1.113-1.148]; 4 heads 1.092), 4 heads at 1k (1.092 [1.079-1.112]; 8 heads,
the rule's, 1.081 [1.063-1.098]; 16 heads 1.052). The rule's picks are the best or within its spread: kept.

    python gpu/experiments/causal_order.py [groups | all | items | walks [d64] [seqs]]
"""

import helpers
from helpers import flash_hopper_persistent as walk
from helpers.attention import attention_case, attention_flops, qkv, sdpa
from helpers.attention_sweep import HEADS
from helpers.flash_hopper_softmax import with_softmax

from exp_poly import sweep_softmax

SEQS = [512, 1024, 2048]  # `all`: SEQS of the notebook's sweep, 512 to 16k
ORDERS = None  # `groups` on the command line: the notebook's order and the grouped ones only
ITEMS = None  # `items`: groups of 64, 128, 256 and 512 items, whatever their heads
DIMS = (64, 128)
SWEEPS_SOFTMAX = False  # `walks`: each kernel with the softmax 11's sweep gives it, not the lesson's
ON_HOPPER = dict(arch="sm_90a", tir_pipeline="tirx")


def main():
    nb = helpers.start("11_flash_attention_hopper")
    sms = nb.spec.sm_count
    print(f"{nb.spec.name}: causal, TFLOP/s and cuDNN's time over ours (median [quartiles] of rounds)")
    for d in DIMS:
        for n in SEQS:
            shape = (32768 // n, HEADS, n, d)
            bh, name = shape[0] * HEADS, "x".join(map(str, shape)) + " causal"
            q, k, v = qkv(*shape, True)
            base = nb.torch_op(f"cuDNN {name}", sdpa("CUDNN_ATTENTION", *shape[:2], True), [q, k, v],
                               flops=attention_flops(*shape, True), quiet=True)
            orders = [("per head, a block each", None, walk.work_item),
                      ("longest first, a block each", None, walk.in_groups(bh, bh)),
                      ("per head, persistent", sms, walk.work_item),
                      ("longest first, persistent", sms, walk.in_groups(bh, bh)),
                      ("by 8 heads, persistent", sms, walk.in_groups(bh, 8)),
                      ("by 32 heads, persistent", sms, walk.in_groups(bh, 32)),
                      ("by 16 heads, persistent", sms, walk.in_groups(bh, 16))]
            if SWEEPS_SOFTMAX:
                orders += [("by 4 heads, persistent", sms, walk.in_groups(bh, 4)),
                           ("by 64 heads, persistent", sms, walk.in_groups(bh, 64))]
            if ITEMS:  # groups of a given number of items (row blocks of all the group's heads) instead
                groups = [(items, items * 128 // n) for items in ITEMS if items * 128 // n in range(1, bh + 1)]
                orders = orders[:1] + [(f"by {g} heads ({items} items), persistent", sms, walk.in_groups(bh, g))
                                       for items, g in groups]
            for label, blocks, order in [o for i, o in enumerate(orders) if ORDERS is None or i in ORDERS]:
                softmax = sweep_softmax(d, True) if SWEEPS_SOFTMAX else walk.online_softmax
                kernel = with_softmax(softmax, walk.persistent_flash_attention, bh, n, d, True, blocks, order)
                m = nb.measure(f"{label} {name}", kernel,
                               **ON_HOPPER, **attention_case(*shape, True, inputs=[q, k, v]), baseline=base, quiet=True)
                lo, hi = m.ratio_quartiles or (0, 0)
                print(f"  d={d:3d} {n:5d} {label:28s} {m.tflops:6.1f} TFLOP/s, {m.ratio:.3f} [{lo:.3f}-{hi:.3f}],"
                      f" error {m.rel_err:.0e}", flush=True)


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["groups"]:
        ORDERS = [0, 4, 5]
    if sys.argv[1:2] == ["all"]:  # every length of the notebook's sweep, the notebook's order and G = 8, 16, 32
        from helpers.attention_sweep import SEQS
        ORDERS = [0, 4, 6, 5]
    if sys.argv[1:2] == ["items"]:  # is a group of about one wave of items (128 of 132 blocks) what slows d=128?
        SEQS, ITEMS = [512, 1024, 2048, 4096], [64, 128, 256, 512]
    if sys.argv[1:2] == ["walks"]:  # H100: which walk wins at 512-2k causal with the sweep's softmax
        dims = (64,) if "d64" in sys.argv else (128,)  # `walks d64 ...`: head dim 64 instead
        SWEEPS_SOFTMAX, DIMS, SEQS = True, dims, [int(a) for a in sys.argv[2:] if a != "d64"] or [512, 1024]
    main()
