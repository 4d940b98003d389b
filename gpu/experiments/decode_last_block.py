"""A candidate next step for notebook 12: the merge done by the last block of each (sequence, KV
head) to finish, instead of a second kernel. Each block writes its split's state, makes it visible
(`T.cuda.thread_fence`), and counts itself on an arrival counter (`T.cuda.atomic_add`); the block
that arrives last merges the group's splits and sets the counter back to 0 for the next call. One
launch, and no kernel boundary, where the small caches pay fixed costs (results/decode_plans.txt).

Times it against `decode_paged_ahead` (two kernels) on the sweep's small caches, each checked
against the float64 reference, in 9 interleaved rounds with the copy of the same bytes, flushed and
held as the notebook times them.

    python gpu/experiments/decode_last_block.py
"""

import inspect

import numpy as np

import helpers
from decode_plans import against_copy, case, setup
from lesson_code import edited, module_from_source
from helpers import decode, decode_steps, kernels
from helpers.decode import HKV, HQ, D

SHAPES = [(1, 1024), (1, 8192), (8, 1024), (1, 32768), (32, 1024), (8, 8192)]


# decode_paged_ahead with the merge moved into its blocks: the edits, each found once in its source
EDITS = {
    "def decode_paged_ahead(": "def decode_paged_last_merges(",
    'LSE: T.Buffer((B, splits, HQ), "float32"), O:':
        'LSE: T.Buffer((B, splits, HQ), "float32"),\n             arrived: T.Buffer((B, HKV), "int32"), O:',
    '            so = T.alloc_buffer((ROWS, heads, D), "float32", scope="shared")\n':
        '            so = T.alloc_buffer((ROWS, heads, D), "float32", scope="shared")\n'
        '            last = T.alloc_buffer((1,), "int32", scope="shared")\n',
    "        merge_splits(O, Op, LSE, B, HQ, D, splits)\n": """\
            T.cuda.thread_fence()  # this split's state reaches the GPU before the block counts itself
            T.cuda.cta_sync()
            if tid == 0:
                last[0] = T.cuda.atomic_add(T.address_of(arrived[b, h]), 1)
            T.cuda.cta_sync()
            if last[0] == splits - 1:  # the last block of (b, h): merge the group's splits
                T.cuda.thread_fence()
                for j in T.unroll(heads * D // THREADS):
                    g, d = T.meta_var((j * THREADS + tid) // D), T.meta_var((j * THREADS + tid) % D)
                    mx[0] = T.float32(NEG)
                    for t in T.serial(splits):
                        mx[0] = T.max(mx[0], LSE[b, t, h * heads + g])
                    acc[0] = T.float32(0)
                    tot[0] = T.float32(0)
                    for t in T.serial(splits):
                        tot[0] = tot[0] + T.exp2(LSE[b, t, h * heads + g] - mx[0])
                        acc[0] = acc[0] + T.exp2(LSE[b, t, h * heads + g] - mx[0]) * Op[b, t, h * heads + g, d]
                    O[b, h * heads + g, d] = T.Cast("float16", acc[0] / tot[0])
                if tid == 0:
                    arrived[b, h] = 0  # ready for the next call
""",
}
HEADER = """from tvm.script import tirx as T
from helpers.decode import check_heads
from helpers.decode_steps import KEYS, load_keys, scores_keys, update_keys
from helpers.lessons.decoding import LANES, LOG2E, NEG, ROWS, THREADS, VEC, init_state, load_q, share_rows, write_partial
"""


def last_merges_kernel():
    """`decode_paged_last_merges`, made from decode_paged_ahead's own source by EDITS and written to a
    module file (TVMScript reads a kernel's source)."""
    src = edited(inspect.getsource(decode_steps.decode_paged_ahead), EDITS, "decode_paged_ahead")
    module = module_from_source("decode_last_merges", HEADER + "\n\n" + src)
    return module.decode_paged_last_merges


def main():
    plan_one_wave = helpers.lessons.lesson("12_decoding").plan_one_wave
    dev, target, spec, flush = setup()
    print(f"{spec.name}; plan_one_wave; medians of 9 rounds, flushed and held (8x8k: 256 MiB, flushed too)")
    for b, n in SHAPES:
        splits, chunk = plan_one_wave([n] * b, spec.sm_count)
        q, kv, table, lengths, ref, copy = case(b, n, flush)
        shape = (b, HQ, HKV, D, *decode.pool_size([n] * b), splits, chunk)
        outs = decode.split_outputs(b, splits)
        for name, kernel, args in [("two kernels", decode_steps.decode_paged_ahead(*shape), [q, kv, table, lengths, *outs]),
                                   ("last block merges", last_merges_kernel()(*shape),
                                    [q, kv, table, lengths, *outs[:2], np.zeros((b, HKV), "int32"), outs[2]])]:
            ex = kernels.build(kernel, target, "tirx")  # run twice first: the counters must be back at 0
            print(f"  {b}x{n // 1024}k {name:18s} {splits:3d} splits of {chunk:5d}: "
                  + against_copy(ex, dev, args, ref, copy, flush, calls=2))

if __name__ == "__main__":
    main()
