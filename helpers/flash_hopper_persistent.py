"""Notebook 11's last kernel, persistent: one block per SM walks the work items (a head and 128
rows of Q each), where section 3's kernel launched a block per item. The notebook shows it as its
diff against section 3's code (`difflib.unified_diff`), so here it is in full: the section 3 kernel,
whose tile macros (first_tile, overlapped_tile) it calls as they are, plus what a walk needs: the
item a block takes at each turn (`work_item`, or the order a student writes), a count of the K and
V tiles a block has loaded or used so far (`slot`: the stage and its parity follow from it across
items, and the tile macros take it where section 3 passed 0), and two buffers of Q (item t's in
buffer t % 2), each with its "full" mbarrier and a Q_EMPTY one on which the producer waits for both
consumers: it loads the next item's Q while this one runs, so a consumer that ends an item finds the
next Q waiting. The consumers' turn (named barriers 8 and 9) passes on from item to item: consumer
1's first arrival and consumer 0's last wait sit outside the walk, so consumer 0 starts its next
item while consumer 1 finishes its last product (each takes as many turns an item as the other).
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
def consume_overlapped(bh, bx, tiles, turn, dim, masked):
    # consume with the products of two tiles in flight: tile 0's S first, the last P V after the loop
    wg, t = T.meta_var(warpgroup - 1), T.meta_var(tid % 128)  # the consumer warpgroup, its thread
    row0 = T.meta_var(bx * BR_H + wg * 64 + t // 32 * 16)  # the first of this warp's 16 rows
    init_rows(o, m, l, dim)
    Qs = T.decl_buffer((dim // 64, BR_H, 64), "float16", pool.data, elem_offset=q_at(turn, dim), scope="shared.dyn")
    first_tile(turn, slot[0], dim, masked)
    for j in T.serial(tiles - 2 if masked else tiles - 1):  # causal: the diagonal tile's S after the loop too
        overlapped_tile(j, slot[0], dim, False)
    if masked and tiles >= 2:
        overlapped_tile(tiles - 2, slot[0], dim, True)
    release(Q_EMPTY, turn % Q_BUFS)
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
        slot = T.alloc_local((1,), "int32")  # K and V tiles loaded or used so far (produce, consume count them)
        slot[0] = 0
        if tid < 128:
            T.ptx["setmaxnreg.dec.sync.aligned.u32"](40)  # the producer needs few registers: give them away
            if tid == 0:
                for turn in T.serial((items - block + blocks - 1) // blocks):
                    bh, bx, tiles = T.meta_var(work_item(block + turn * blocks, N // BR_H, N, causal))
                    produce(bh, bx, tiles, turn, N, D)
        else:
            T.ptx["setmaxnreg.inc.sync.aligned.u32"](232)  # 232 x 256 + 40 x 128 <= 64K registers
            s, o, pf = T.alloc_local((BC_H // 2,), "float32"), T.alloc_local((D // 2,), "float32"), T.alloc_local((BC_H // 4,), "uint32")
            desc_a, desc_b = T.alloc_local((1,), "uint64"), T.alloc_local((1,), "uint64")
            m, l = T.alloc_local((2,), "float32"), T.alloc_local((2,), "float32")
            mx, alpha = T.alloc_local((2,), "float32"), T.alloc_local((2,), "float32")
            if warpgroup == 2:
                T.ptx.bar.arrive(T.uint32(8), T.uint32(256))  # consumer 0 takes the first turn, once
            for turn in T.serial((items - block + blocks - 1) // blocks):
                bh, bx, tiles = T.meta_var(work_item(block + turn * blocks, N // BR_H, N, causal))
                consume_overlapped(bh, bx, tiles, turn, D, causal)
            if warpgroup == 1:
                T.ptx.bar.sync(T.uint32(8), T.uint32(256))  # consumer 1's last arrival, once

    return main
