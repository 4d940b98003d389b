"""At 512 tokens and head dim 128 the persistent kernel trails cuDNN by 8-10%. Nsight Compute on the
H200 at 64x16x512x128 (`results/q_double.profile.short.txt`, 615f018): our tensor pipe is busy 56% of
cycles against cuDNN's 63%, our issue slots 31% against 41%, so neither the tensor cores nor the
instruction count hold us; the consumers wait at item boundaries. An item of 4 tiles gives each
consumer 4 turns at the tensor cores; the first S of the next item runs alone, after the last P V
and the store of O, and its softmax waits for it: each item boundary costs a consumer about a
turn's worth of tensor time (one S alone, one P V alone, the store in between).

`streamed`: the next item's first S issued with this item's last P V, in the same turn, as the
tiles within an item already are (`overlapped_tile`): the consumer keeps this item's row sums, starts
the next item's rows, runs the next item's first softmax while P V finishes, then stores O. The
item's first S is issued by the previous item's last turn (by `first_tile` for the walk's first
item). Each consumer still takes `tiles` turns an item, so the ping-pong relay across items stays.
It needs the next item's Q loaded before this item's last turn: the two Q buffers.

Each kernel (11's sweep's choice, its softmax included) is checked against the float64 reference and
timed in rounds alternating with cuDNN: 32k tokens a batch, 16 heads, fp16.

`causal`: where 11's sweep launches a block per causal item (head dim 128 from 2k, 64 from 8k), also
the streamed kernel persistent with the items in groups.

    python gpu/experiments/stream_items.py [sweep | causal]
"""

import inspect
import sys

from helpers import flash_hopper_persistent as walk

from exp_poly import best, main  # 11's sweep's kernel, and its rounds against cuDNN
from lesson_code import edited, module_from_source

STREAMED_CONSUME = '''@T.macro(hygienic=False)
def consume_streamed(bh, bx, tiles, turn, more, nbx, dim, masked):
    # as consume_overlapped, but this item's first S was issued by the last one's last turn (for the
    # walk's first item, by first_tile), and, if `more` items follow, the last turn issues the next
    # item's first S (row block nbx) beside this item's last P V
    wg, t = T.meta_var(warpgroup - 1), T.meta_var(tid % 128)  # the consumer warpgroup, its thread
    row0 = T.meta_var(bx * BR_H + wg * 64 + t // 32 * 16)  # the first of this warp's 16 rows
    Qs = T.decl_buffer((dim // 64, BR_H, 64), "float16", pool.data, elem_offset=q_at(turn, dim), scope="shared.dyn")
    if turn == 0:
        init_rows(o, m, l, dim)
        first_tile(turn, slot[0], dim, masked)
    for j in T.serial(tiles - 2 if masked else tiles - 1):  # causal: the diagonal tile's S after the loop too
        overlapped_tile(j, slot[0], dim, False)
    if masked and tiles >= 2:
        overlapped_tile(tiles - 2, slot[0], dim, True)
    release(Q_EMPTY, turn % Q_BUFS)
    st, phase = T.meta_var((slot[0] + tiles - 1) % STAGES), T.meta_var((slot[0] + tiles - 1) // STAGES % 2)
    nst, nphase = T.meta_var((slot[0] + tiles) % STAGES), T.meta_var((slot[0] + tiles) // STAGES % 2)
    T.cuda.mbarrier_wait(bars.ptr_to([V_FULL + st]), phase)
    if more:
        nQs = T.decl_buffer((dim // 64, BR_H, 64), "float16", pool.data, elem_offset=q_at(turn + 1, dim),
                            scope="shared.dyn")
        T.cuda.mbarrier_wait(bars.ptr_to([Q_FULL + (turn + 1) % Q_BUFS]), (turn + 1) // Q_BUFS % 2)
        T.cuda.mbarrier_wait(bars.ptr_to([K_FULL + nst]), nphase)
        T.ptx.bar.sync(T.uint32(8 + wg), T.uint32(256))
        gemm_s(nQs, Ks, s, desc_a, desc_b, nst, wg, dim)  # the next item's first S
        gemm_o(Vs, o, pf, desc_b, st, dim)  # this item's last P V
        T.ptx.bar.arrive(T.uint32(9 - wg), T.uint32(256))
        T.ptx.wgmma.wait_group.sync.aligned(1)  # S is done; P V may still run
        release(K_EMPTY, nst)
        for h in T.unroll(2):  # this item's row sums kept for its store; the next item's rows start
            lsum[h] = l[h]
            m[h] = T.float32(-1e30)
            l[h] = T.float32(0)
        if masked:
            mask_above_diagonal(s, 0, nbx * BR_H + wg * 64 + t // 32 * 16, t % 32, BC_H)
        online_softmax(s, m, l, mx, alpha, BC_H, LOG2E / dim ** 0.5)
        T.ptx.wgmma.wait_group.sync.aligned(0)  # P V is done
        release(V_EMPTY, st)
        store_rows(O, o, lsum, bh, row0, t % 32, dim)
        for i in T.unroll(dim // 2):
            o[i] = T.float32(0)
        pack_p(pf, s)
    else:
        T.ptx.bar.sync(T.uint32(8 + wg), T.uint32(256))
        gemm_o(Vs, o, pf, desc_b, st, dim)
        T.ptx.bar.arrive(T.uint32(9 - wg), T.uint32(256))
        T.ptx.wgmma.wait_group.sync.aligned(0)
        release(V_EMPTY, st)
        store_rows(O, o, l, bh, row0, t % 32, dim)
    slot[0] = slot[0] + tiles


def work_item('''


def streamed_module():
    """helpers.flash_hopper_persistent with `consume_streamed` in the walk in place of `consume_overlapped`.
    Since 0fd801d the lesson's walk is this (`next_item_tile`): this refuses, and the study runs at 40c7641."""
    if hasattr(walk, "next_item_tile"):
        raise LookupError("the lesson's walk streams items already (next_item_tile, since 0fd801d): "
                          "run stream_items.py at 40c7641 or earlier")
    src = edited(inspect.getsource(walk), {
        "\n\ndef work_item(": "\n\n" + STREAMED_CONSUME,
        "m, l = T.alloc_local((2,), \"float32\"), T.alloc_local((2,), \"float32\")":
        "m, l, lsum = T.alloc_local((2,), \"float32\"), T.alloc_local((2,), \"float32\"), T.alloc_local((2,), \"float32\")",
        "                bh, bx, tiles = T.meta_var(work_item(block + turn * blocks, N // BR_H, N, causal))\n"
        "                consume_overlapped(bh, bx, tiles, turn, D, causal)":
        "                bh, bx, tiles = T.meta_var(work_item(block + turn * blocks, N // BR_H, N, causal))\n"
        "                nbx = T.meta_var(work_item(block + (turn + 1) * blocks, N // BR_H, N, causal)[1])\n"
        "                consume_streamed(bh, bx, tiles, turn, turn + 1 < (items - block + blocks - 1) // blocks, nbx, D,\n"
        "                                 causal)",
    }, "flash_hopper_persistent")
    return module_from_source("flash_hopper_streamed", src)




def columns(d):
    return [("lesson", best()), ("streamed", best(streamed_module()))]


def grouped(bh, n, d, causal):
    """The streamed kernel, persistent, causal items in groups (11's `in_groups`): 16 heads a group, fewer where
    a group's K and V would not fit in L2 (16 x 4 x n x d bytes)."""
    import helpers
    from helpers.flash_hopper_softmax import hopper_softmax, with_softmax

    spec, walk_ = helpers.local_gpu_spec(), sys.modules["flash_hopper_streamed"]
    group = next(g for g in (16, 8, 4, 2, 1) if g * 4 * n * d <= spec.l2_bytes and bh % g == 0)
    return with_softmax(hopper_softmax(int(d == 64)), walk_.persistent_flash_attention, bh, n, d, causal,
                        spec.sm_count, walk_.in_groups(bh, group))


def causal_columns(d):
    """Causal beyond where 11 walks items in groups: its block per item, streamed persistent in groups."""
    return columns(d) + [("streamed, in groups", grouped)]


if __name__ == "__main__":
    if sys.argv[1:2] == ["sweep"]:
        from helpers.attention_sweep import SEQS
        main([(d, n) for d in (64, 128) for n in SEQS], (False, True), columns)
    elif sys.argv[1:2] == ["causal"]:  # where 11's sweep launches a block per causal item
        main([(128, 2048), (128, 4096), (128, 8192), (128, 16384), (64, 8192), (64, 16384)], (True,), causal_columns)
    else:
        main([(128, 512), (128, 1024), (128, 2048), (64, 512), (128, 16384)], (False, True), columns)
