"""Short sequences trail cuDNN (512 tokens, head dim 128: 414 against 450 TFLOP/s, where 16k reaches
641): an item of 512 tokens has 4 tiles of K and V, so what each item costs besides its tiles weighs
four times what it weighs at 2k. In notebook 11's persistent kernel the two consumers pass a turn
(named barriers 8 and 9) so that one's products run while the other computes its softmax; but every
item starts the relay afresh: consumer 0 waits at the item's end for consumer 1's last product
(`bar.sync(8)`), and at the next item's start both issue their first S together and compute their
first softmax together, with the tensor cores idle.

`relay`: the same kernel with the turn handed on across items: consumer 1's arrival that gives
consumer 0 the first turn happens once, before the walk, and consumer 0 takes the last arrival once,
after it. Each consumer takes as many turns an item as the other (the item's tiles), so the turns
alternate across items as within one, and consumer 0 starts its next item while consumer 1 finishes
its last product. Since commit b21677b the lesson's kernel (`helpers.flash_hopper_persistent`) is the
relay, and `restart_module` edits a copy of its source back to the restart (failing if the lines are
not there once); the run at 344a833 (`results/relay_items.sweep.txt`) had the two the other way
round, "lesson" the restart and "relay" the edited copy. Since the lesson's kernel took two Q buffers
(after 5118154), the restart has them too.

Each kernel (11's sweep's choice, its softmax included) is checked against the float64 reference and
timed in rounds alternating with cuDNN: 32k tokens a batch, 16 heads, fp16.

    python gpu/experiments/relay_items.py [sweep]
"""

import inspect
import sys

from helpers import flash_hopper_persistent as walk

from exp_poly import best, main  # 11's sweep's kernel, and its rounds against cuDNN
from lesson_code import edited, module_from_source

START = ("    init_rows(o, m, l, dim)\n",
           "    init_rows(o, m, l, dim)\n"
           "    if wg == 1:\n        T.ptx.bar.arrive(T.uint32(8), T.uint32(256))  # consumer 0 takes the first turn\n")
END = ("    release(V_EMPTY, st)\n",
       "    release(V_EMPTY, st)\n"
       "    if wg == 0:\n        T.ptx.bar.sync(T.uint32(8), T.uint32(256))  # consumer 1's last arrival\n")
ONCE = ("            if warpgroup == 2:\n"
        "                T.ptx.bar.arrive(T.uint32(8), T.uint32(256))  # consumer 0 takes the first turn, once\n",
        "            if warpgroup == 1:\n"
        "                T.ptx.bar.sync(T.uint32(8), T.uint32(256))  # consumer 1's last arrival, once\n")


def restart_module():
    """helpers.flash_hopper_persistent with the relay started afresh in every item, as before b21677b. Since
    0fd801d a consumer's tiles run as one stream across items (`next_item_tile`), so there is no item's end
    to restart the relay at: this refuses, and the study runs at 40c7641 or earlier."""
    if hasattr(walk, "next_item_tile"):
        raise LookupError("no relay to restart: the lesson's walk streams a consumer's tiles across items "
                          "(next_item_tile, since 0fd801d); run relay_items.py at 40c7641 or earlier")
    edits = dict([START, END, (ONCE[0], ""), (ONCE[1], "")])
    return module_from_source("flash_hopper_restart", edited(inspect.getsource(walk), edits, "flash_hopper_persistent"))


def columns(d):
    """The restart and the relay (the lesson's kernel now), each with 11's softmax for head dim d."""
    return [("restart", RESTART), ("relay", best())]


if __name__ == "__main__":
    RESTART = best(restart_module())  # 11's sweep's kernel, the relay restarted every item
    if sys.argv[1:2] == ["sweep"]:
        from helpers.attention_sweep import SEQS
        main([(d, n) for d in (64, 128) for n in SEQS], (False, True), columns)
    else:
        main([(128, 512), (128, 1024), (64, 512), (128, 2048)], (False, True), columns)
