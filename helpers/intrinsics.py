"""A tensor intrinsic TVM does not ship: storing `mma.sync` accumulators to C two floats at a time.

It lives here, not in a notebook, because a tuned trace names its intrinsics: every process that
replays notebook 06's `fp16_mma_template` database (the notebook, `06_tune.py`, the tests) must
have it registered. The first use of `helpers.MMA_STORE_PAIRS`, or opening a database whose
traces tensorize, imports this module and so registers it.

Importing it takes a while (about half a minute on a 2-core machine, a minute on the GPU
machine): `tvm.s_tir.tensor_intrin.cuda`, which it needs, registers every tensor intrinsic TVM
has, for every backend. That is why `import helpers` does not import it.
"""

from __future__ import annotations

from tvm.s_tir import TensorIntrin
from tvm.s_tir.tensor_intrin.cuda import get_mma_store_intrin
from tvm.script import tirx as T

#: The name to `sch.tensorize(loop, MMA_STORE_PAIRS)` a 16x16 float32 accumulator store with.
MMA_STORE_PAIRS = "mma_store_16x16_f32_global_pairs"


@T.prim_func(s_tir=True)
def mma_store_pairs(a: T.handle, c: T.handle) -> None:
    """Accumulators of one 16x16 tile (32 threads x 8 floats, the `mma.sync` layout) to C.

    TVM's own `mma_store` writes C one float at a time. Each thread's floats come in pairs of
    adjacent columns (local ids 2p and 2p+1), so one 8-byte store can write two. TVM's
    warp-memory lowering cannot prove these reads are the thread's own values, so it passes
    each one through a shuffle from the thread's own lane: two shuffles buy one wide store.
    """
    s0, s1 = T.int32(), T.int32()
    acc = T.match_buffer(a, [32, 8], "float32", scope="warp", offset_factor=1)
    out = T.match_buffer(c, [16, 16], "float32", scope="global", offset_factor=1, strides=[s0, s1])
    with T.sblock("root"):
        T.reads(acc[0:32, 0:8])
        T.writes(out[0:16, 0:16])
        for tx in T.thread_binding(0, 32, "threadIdx.x"):
            for half in T.unroll(2):  # columns 0-7, then 8-15
                for row8 in T.unroll(2):  # rows 0-7, then 8-15
                    pair = T.Shuffle([acc[tx, half * 4 + row8 * 2], acc[tx, half * 4 + row8 * 2 + 1]], [0, 1])
                    T.buffer_store(out, pair, [row8 * 8 + tx // 4, T.Ramp(half * 8 + tx % 4 * 2, 1, 2)])


# The description (what the 16x16 store computes) is TVM's; only the implementation is new.
TensorIntrin.register(MMA_STORE_PAIRS, get_mma_store_intrin("float32", 8, "global", True)[0], mma_store_pairs,
                      override=True)
