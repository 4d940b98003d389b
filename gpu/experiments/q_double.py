"""Short sequences still trail cuDNN after the relay across items (512 tokens: 0.83-0.97x in 11's
record at 871a980). One fixed cost an item keeps: the producer loads the next item's Q only when both
consumers have released the last one (after their last S, `Q_EMPTY`), so the consumer that finishes
first waits for that TMA load (32 KiB at head dim 128) before its next S, once an item of 4 tiles at
512 tokens.

`double Q`: the persistent kernel with two Q buffers, item t's in buffer t % 2, with a full and an
empty barrier each (parities t // 2 % 2): the producer loads item t + 1's Q while item t runs, and a
consumer starts its next S as soon as it is done. At head dim 128 it takes 32 KiB more shared memory
(192 of 227 KiB). The kernel is `helpers.flash_hopper_persistent` edited (`double_q_module`), with
`first_tile` (notebook 11's) edited to wait on the item's own Q barrier; each edit must find its text
once. Each kernel (11's sweep's choice, its softmax included) is checked against the float64 reference
and timed in rounds alternating with cuDNN: 32k tokens a batch, 16 heads, fp16.

    python gpu/experiments/q_double.py [sweep]
"""

import inspect
import sys

from helpers import flash_hopper_persistent as walk
from helpers.lessons import source_of

from exp_poly import best, main  # 11's sweep's kernel, and its rounds against cuDNN
from lesson_code import edited, module_from_source

FIRST_TILE = {
    "T.cuda.mbarrier_wait(bars.ptr_to([Q_FULL]), turn % 2)": "T.cuda.mbarrier_wait(bars.ptr_to([Q_FULL + turn % 2]), turn // 2 % 2)",
}
PERSISTENT = {
    "Q_FULL, K_FULL, V_FULL = 0, 1, 1 + STAGES\nQ_EMPTY, K_EMPTY, V_EMPTY = 1 + 2 * STAGES, 2 + 2 * STAGES, 2 + 3 * STAGES\n":
        "Q_FULL, K_FULL, V_FULL = 0, 2, 2 + STAGES  # two Q buffers: a full and an empty barrier each\n"
        "Q_EMPTY, K_EMPTY, V_EMPTY = 2 + 2 * STAGES, 4 + 2 * STAGES, 4 + 3 * STAGES\n",
    "    T.cuda.mbarrier_wait(bars.ptr_to([Q_EMPTY]), turn % 2 ^ 1)\n":
        "    T.cuda.mbarrier_wait(bars.ptr_to([Q_EMPTY + turn % 2]), turn // 2 % 2 ^ 1)\n",
    "bars.ptr_to([Q_FULL]), dim // 64,": "bars.ptr_to([Q_FULL + turn % 2]), dim // 64,",
    "    release(Q_EMPTY, 0)\n": "    release(Q_EMPTY, turn % 2)\n",
    "        for i in T.unroll(2 + 2 * STAGES):": "        for i in T.unroll(2 + 2 * STAGES):  # Q_EMPTY's two, K's and V's",
    "(BR_H + 2 * STAGES * BC_H) * D * 2  # at": "(2 * BR_H + 2 * STAGES * BC_H) * D * 2  # at",
    "(at + (2 + 4 * STAGES) * 8,)": "(at + (4 + 4 * STAGES) * 8,)",
    "        Qs = T.decl_buffer((D // 64, BR_H, 64), \"float16\", data=pool.data, elem_offset=0, scope=\"shared.dyn\")\n": "",
    "elem_offset=BR_H * D, scope": "elem_offset=2 * BR_H * D, scope",
    "elem_offset=(BR_H + STAGES * BC_H) * D, scope": "elem_offset=(2 * BR_H + STAGES * BC_H) * D, scope",
    "bars = T.decl_buffer((2 + 4 * STAGES,)": "bars = T.decl_buffer((4 + 4 * STAGES,)",
    "                    produce(bh, bx, tiles, turn, N, D)\n":
        "                    Qs = T.decl_buffer((D // 64, BR_H, 64), \"float16\", data=pool.data,\n"
        "                                       elem_offset=turn % 2 * BR_H * D, scope=\"shared.dyn\")\n"
        "                    produce(bh, bx, tiles, turn, N, D)\n",
    "                consume_overlapped(bh, bx, tiles, turn, D, causal)\n":
        "                Qs = T.decl_buffer((D // 64, BR_H, 64), \"float16\", data=pool.data,\n"
        "                                   elem_offset=turn % 2 * BR_H * D, scope=\"shared.dyn\")\n"
        "                consume_overlapped(bh, bx, tiles, turn, D, causal)\n",
}


def double_q_module():
    """helpers.flash_hopper_persistent with two Q buffers, and its own first_tile waiting on the item's."""
    first = edited(source_of(walk.first_tile), FIRST_TILE, "notebook 11's first_tile")
    here = "\n\n@T.macro\ndef init_barriers"  # the edited first_tile goes before it, over the imported one
    src = edited(inspect.getsource(walk), {**PERSISTENT, here: "\n\n" + first + here}, "flash_hopper_persistent")
    return module_from_source("flash_hopper_double_q", src)


def columns(d):
    """The lesson's kernel and the one with two Q buffers, each with 11's softmax for head dim d."""
    return [("lesson", best()), ("double Q", DOUBLE_Q)]


DOUBLE_Q = best(double_q_module())  # 11's sweep's kernel with two Q buffers

if __name__ == "__main__":
    if sys.argv[1:2] == ["sweep"]:
        from helpers.attention_sweep import SEQS
        main([(d, n) for d in (64, 128) for n in SEQS], (False, True), columns)
    else:
        main([(128, 512), (128, 1024), (64, 512)], (False, True), columns)
