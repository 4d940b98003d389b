"""Notebook 11's last kernel, persistent: one block per SM walks the work items (a head and 128
rows of Q each), where section 3's kernel launched a block per item. The notebook shows it as its
diff against section 3's code (`difflib.unified_diff`), so here it is in full: the section 3 kernel,
whose tile macros (first_tile, overlapped_tile) it calls as they are, plus what a walk needs: the
item a block takes at each turn (`work_item`, or the order a student writes), a count of the K and
V tiles a block has loaded or used so far (`slot`: the stage and its parity follow from it across
items, and the tile macros take it where section 3 passed 0), and two buffers of Q (item t's in
buffer t % 2), each with its "full" mbarrier and a Q_EMPTY one on which the producer waits for both
consumers: it loads the next item's Q while this one runs. That lets a consumer's tiles run as one
stream across items (`next_item_tile`): an item's last P V goes out with the next item's first S, in
one turn, as `overlapped_tile` pairs the tiles within an item, and the next item's softmax runs while
that P V finishes; the item's O is stored after it, its row sums kept aside (`l_done`). The
consumers' turn (named barriers 8 and 9) passes on from item to item: consumer 1's first arrival and
consumer 0's last wait sit outside the walk, so consumer 0 starts its next item while consumer 1
finishes its last product (each takes as many turns an item as the other).
Its generated CUDA is the one recorded."""

from tvm.script import tirx as T

from helpers.attention import check_shape
# the macros are not hygienic: a name in their bodies (first_tile's and overlapped_tile's too) is looked up
# where the kernel is, here, so this module imports what they call, and its own barrier numbers serve them
from helpers.lessons.flash_attention import (LOG2E, init_rows, mask_above_diagonal, online_softmax, rescale,
                                             store_rows)
from helpers.lessons.flash_attention_hopper import (BC_H, BR_H, STAGES, SWIZZLE_128B, first_tile, gemm_o, gemm_s,
                                                    overlapped_tile, pack_p, release, tma_options, tma_tile)

__all__ = ["persistent_flash_attention", "work_item", "in_groups", "Q_BUFS", "Q_EMPTY", "SWIZZLE_128B"]

Q_BUFS = 2  # buffers of Q: item t's Q in buffer t % 2 (first_tile reads this, the kernel's module's)
# the mbarriers, in one array: section 3's with a "full" one per Q buffer, and an "empty" one per Q buffer
Q_FULL, K_FULL, V_FULL = 0, Q_BUFS, Q_BUFS + STAGES
Q_EMPTY, K_EMPTY, V_EMPTY = Q_BUFS + 2 * STAGES, 2 * Q_BUFS + 2 * STAGES, 2 * Q_BUFS + 3 * STAGES
BARS = V_EMPTY + STAGES  # mbarriers in all


def q_at(turn, dim):
    # where item `turn`'s Q buffer starts, in halves: buffer 0 where section 3's Q is, 1 after V's stages
    return turn % Q_BUFS * (BR_H + 2 * STAGES * BC_H) * dim


@T.macro
def init_barriers(bars, tid):
    if tid == 0:
        for i in T.unroll(Q_EMPTY):  # "full": the producer's one arrival, with the bytes it expects
            T.ptx.mbarrier.init.shared.b64(bars.ptr_to([i]), T.uint32(1))
        for i in T.unroll(Q_BUFS + 2 * STAGES):  # "empty": one arrival from each consumer
            T.ptx.mbarrier.init.shared.b64(bars.ptr_to([Q_EMPTY + i]), T.uint32(2))
        T.ptx.fence.mbarrier_init.release.cluster()
    T.cuda.cta_sync()


@T.macro(hygienic=False)
def produce(bh, bx, tiles, turn, seq, dim):
    # one item: its Q once the consumers are done with the buffer's last, then K_j and V_j into the
    # stage each frees. slot[0]: tiles loaded before (the stage is slot % STAGES); turn: items before
    qb = T.meta_var(turn % Q_BUFS)  # the item's Q buffer
    Qs = T.decl_buffer((dim // 64, BR_H, 64), "float16", pool.data, elem_offset=q_at(turn, dim), scope="shared.dyn")
    T.cuda.mbarrier_wait(bars.ptr_to([Q_EMPTY + qb]), turn // Q_BUFS % 2 ^ 1)
    tma_tile(lambda b: Qs.ptr_to([b, 0, 0]), Q_map, bh * seq + bx * BR_H, bars.ptr_to([Q_FULL + qb]), dim // 64,
             BR_H * dim * 2)
    for j in T.serial(tiles):
        st, phase = T.meta_var((slot[0] + j) % STAGES), T.meta_var((slot[0] + j) // STAGES % 2)
        T.cuda.mbarrier_wait(bars.ptr_to([K_EMPTY + st]), phase ^ 1)  # S of the last K there is done
        tma_tile(lambda b: Ks.ptr_to([st, b, 0, 0]), K_map, bh * seq + j * BC_H, bars.ptr_to([K_FULL + st]),
                 dim // 64, BC_H * dim * 2)
        T.cuda.mbarrier_wait(bars.ptr_to([V_EMPTY + st]), phase ^ 1)  # P V of the last V there is done
        tma_tile(lambda b: Vs.ptr_to([st, b, 0, 0]), V_map, bh * seq + j * BC_H, bars.ptr_to([V_FULL + st]),
                 dim // 64, BC_H * dim * 2)
    slot[0] = slot[0] + tiles


@T.macro(hygienic=False)
def next_item_tile(j, before, turn, nbx, dim, masked):
    # the item's last P V (tile j) and the next item's first S (row block nbx, Q buffer turn + 1) issued
    # together, in this consumer's turn; then the next item's softmax while P V runs, and this item's O
    release(Q_EMPTY, turn % Q_BUFS)  # this item's S are done: its Q buffer may take item turn + 2's
    st, phase = T.meta_var((before + j) % STAGES), T.meta_var((before + j) // STAGES % 2)
    nst, nphase = T.meta_var((before + j + 1) % STAGES), T.meta_var((before + j + 1) // STAGES % 2)
    nQs = T.decl_buffer((dim // 64, BR_H, 64), "float16", pool.data, elem_offset=q_at(turn + 1, dim),
                        scope="shared.dyn")
    T.cuda.mbarrier_wait(bars.ptr_to([Q_FULL + (turn + 1) % Q_BUFS]), (turn + 1) // Q_BUFS % 2)
    T.cuda.mbarrier_wait(bars.ptr_to([K_FULL + nst]), nphase)
    T.cuda.mbarrier_wait(bars.ptr_to([V_FULL + st]), phase)
    T.ptx.bar.sync(T.uint32(8 + wg), T.uint32(256))  # wait for this consumer's turn
    gemm_s(nQs, Ks, s, desc_a, desc_b, nst, wg, dim)
    gemm_o(Vs, o, pf, desc_b, st, dim)
    T.ptx.bar.arrive(T.uint32(9 - wg), T.uint32(256))  # the other consumer's turn
    T.ptx.wgmma.wait_group.sync.aligned(1)  # S is done; P V may still run
    release(K_EMPTY, nst)
    for h in T.unroll(2):  # this item's row sums, kept for its O; the next item's rows start
        l_done[h] = l[h]
        m[h] = T.float32(-1e30)
        l[h] = T.float32(0)
    if masked:
        mask_above_diagonal(s, 0, nbx * BR_H + wg * 64 + t // 32 * 16, t % 32, BC_H)
    online_softmax(s, m, l, mx, alpha, BC_H, LOG2E / dim ** 0.5)
    T.ptx.wgmma.wait_group.sync.aligned(0)  # P V is done: O and P's registers are free again
    release(V_EMPTY, st)
    store_rows(O, o, l_done, bh, row0, t % 32, dim)
    for i in T.unroll(dim // 2):  # the next item's O starts
        o[i] = T.float32(0)
    pack_p(pf, s)


@T.macro(hygienic=False)
def consume_overlapped(bh, bx, tiles, turn, more, nbx, dim, masked):
    # consume with the products of two tiles in flight, from item to item: the item's first S came with
    # the last item's last P V (the walk's first, from first_tile); while items follow (`more`), its last
    # P V goes out with the next item's first S, and the last item's alone
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
    if more:
        next_item_tile(tiles - 1, slot[0], turn, nbx, dim, masked)
    else:
        st, phase = T.meta_var((slot[0] + tiles - 1) % STAGES), T.meta_var((slot[0] + tiles - 1) // STAGES % 2)
        T.cuda.mbarrier_wait(bars.ptr_to([V_FULL + st]), phase)
        T.ptx.bar.sync(T.uint32(8 + wg), T.uint32(256))
        gemm_o(Vs, o, pf, desc_b, st, dim)
        T.ptx.bar.arrive(T.uint32(9 - wg), T.uint32(256))
        T.ptx.wgmma.wait_group.sync.aligned(0)
        release(V_EMPTY, st)
        store_rows(O, o, l, bh, row0, t % 32, dim)
    slot[0] = slot[0] + tiles


def work_item(w, row_blocks, seq, causal):
    # item w: (head, row block, tiles of K and V); causal: longest rows first, tiles up to the diagonal
    bx = row_blocks - 1 - w % row_blocks if causal else w % row_blocks
    return w // row_blocks, bx, bx + 1 if causal else seq // BC_H


def in_groups(heads, group):
    """A causal `work_item` for a persistent grid: heads in groups of `group`, and in each group every
    head's longest row block, then every head's next, ... Block b takes items b, b + blocks, ...: in
    this order each turn hands out items of nearly one length, where head by head block 0 draws the
    longest of every turn, and a group's K and V are read from L2 while its items run."""
    if heads % group:
        raise ValueError(f"{heads} heads are not a whole number of groups of {group}: pick a group that divides them")

    def work_item(w, row_blocks, seq, causal):
        per_group = group * row_blocks  # items of one group
        bx = row_blocks - 1 - w % per_group // group
        return w // per_group * group + w % group, bx, bx + 1
    return work_item


def causal_group(n, d, sms):
    """Heads per group of 11's causal sweep at `n` tokens, head dim `d`, on `sms` SMs. On an H100
    (`causal_order.walks*.txt`, 2026-12-07) groups of 4 heads ran fastest at d = 128 from 512 to 2k
    tokens (1.04-1.14 of cuDNN; 16 heads 0.92-1.12); at d = 64 groups of 16, or 8 where 16 heads'
    row blocks would be within sms/16 of one wave: such groups ran 8-12% slower
    (`causal_order.items.txt`), which the balance of tiles per block does not explain."""
    if d == 128:
        return 4
    return 8 if abs(16 * n // BR_H - sms) < sms // 16 else 16


def persistent_flash_attention(BH, N, D, causal=False, blocks=None, work_item=work_item):
    check_shape(N, D, BR_H)
    items = BH * N // BR_H  # work items, taken in turn by `blocks` blocks (one per item by default)
    blocks, at = blocks or items, (Q_BUFS * BR_H + 2 * STAGES * BC_H) * D * 2  # at: byte offset of the mbarriers
    @T.prim_func
    def main(Q: T.Buffer((BH, N, D), "float16"), K: T.Buffer((BH, N, D), "float16"),
             V: T.Buffer((BH, N, D), "float16"), O: T.Buffer((BH, N, D), "float16")):
        Q_map: T.let[T.TensorMap()] = T.tvm_stack_alloca("tensormap", 1)
        T.tensormap_encode_tiled(Q_map, Q.data, D, BH * N, D * 2, 64, BR_H, 1, 1, **tma_options())
        K_map: T.let[T.TensorMap()] = T.tvm_stack_alloca("tensormap", 1)
        T.tensormap_encode_tiled(K_map, K.data, D, BH * N, D * 2, 64, BC_H, 1, 1, **tma_options())
        V_map: T.let[T.TensorMap()] = T.tvm_stack_alloca("tensormap", 1)
        T.tensormap_encode_tiled(V_map, V.data, D, BH * N, D * 2, 64, BC_H, 1, 1, **tma_options())
        T.device_entry()
        block, tid, warpgroup = T.cta_id([blocks]), T.thread_id([384]), T.warpgroup_id([3])
        pool = T.alloc_buffer((at + BARS * 8,), "uint8", scope="shared.dyn", align=1024)
        Ks = T.decl_buffer((STAGES, D // 64, BC_H, 64), "float16", data=pool.data, elem_offset=BR_H * D, scope="shared.dyn")
        Vs = T.decl_buffer(Ks.shape, "float16", data=pool.data, elem_offset=(BR_H + STAGES * BC_H) * D, scope="shared.dyn")
        bars = T.decl_buffer((BARS,), "uint64", data=pool.data, elem_offset=at // 8, scope="shared.dyn")
        init_barriers(bars, tid)
        turns = T.meta_var((items - block + blocks - 1) // blocks)  # the items this block walks
        slot = T.alloc_local((1,), "int32")  # K and V tiles loaded or used so far (produce, consume count them)
        slot[0] = 0
        if tid < 128:
            T.ptx["setmaxnreg.dec.sync.aligned.u32"](40)  # the producer needs few registers: give them away
            if tid == 0:
                for turn in T.serial(turns):
                    bh, bx, tiles = T.meta_var(work_item(block + turn * blocks, N // BR_H, N, causal))
                    produce(bh, bx, tiles, turn, N, D)
        else:
            T.ptx["setmaxnreg.inc.sync.aligned.u32"](232)  # 232 x 256 + 40 x 128 <= 64K registers
            s, o, pf = T.alloc_local((BC_H // 2,), "float32"), T.alloc_local((D // 2,), "float32"), T.alloc_local((BC_H // 4,), "uint32")
            desc_a, desc_b = T.alloc_local((1,), "uint64"), T.alloc_local((1,), "uint64")
            m, l = T.alloc_local((2,), "float32"), T.alloc_local((2,), "float32")
            l_done = T.alloc_local((2,), "float32")  # an item's row sums while the next item's start
            mx, alpha = T.alloc_local((2,), "float32"), T.alloc_local((2,), "float32")
            if warpgroup == 2:
                T.ptx.bar.arrive(T.uint32(8), T.uint32(256))  # consumer 0 takes the first turn, once
            for turn in T.serial(turns):
                bh, bx, tiles = T.meta_var(work_item(block + turn * blocks, N // BR_H, N, causal))
                nbx = T.meta_var(work_item(block + (turn + 1) * blocks, N // BR_H, N, causal)[1])  # the next item's
                consume_overlapped(bh, bx, tiles, turn, turn + 1 < turns, nbx, D, causal)
            if warpgroup == 1:
                T.ptx.bar.sync(T.uint32(8), T.uint32(256))  # consumer 1's last arrival, once

    return main
