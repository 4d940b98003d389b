"""Notebook 11's kernel at the steps the lesson shows as diffs rather than in full: the softmax
overlapped inside a warpgroup (first as written, then with the first S and the last P V peeled out
of the loop, both without ping-pong), and the persistent kernel that walks work items. The notebook
prints each as `difflib.unified_diff` against the step before; the code lives here so that the
lecture holds the first kernel and the last step of section 3 in full, and the rest as their
changes. Both start with the notebook's first_tile (tile 0's S and softmax), as every later step
does. The macros are not hygienic, as in the notebook: they use the kernel's buffers by name, and
the names of the kernel's module, so consume_peeled takes its tile macro as a default argument."""

from tvm.script import tirx as T

from helpers.lessons.flash_attention import (LOG2E, init_rows, mask_above_diagonal, online_softmax, rescale,
                                             store_rows)
from helpers.lessons.flash_attention_hopper import (BC_H, BR_H, K_EMPTY, K_FULL, STAGES, V_EMPTY, V_FULL, first_tile,
                                                    gemm_o, gemm_s, pack_p, release)

__all__ = ["consume_overlap", "consume_peeled", "peeled_tile"]


@T.macro(hygienic=False)
def consume_overlap(bh, bx, tiles, dim, masked):
    # tile 0's S first; then S of tile j + 1 beside P V of tile j, and its softmax while P V runs
    wg, t = T.meta_var(warpgroup - 1), T.meta_var(tid % 128)  # the consumer warpgroup, its thread
    row0 = T.meta_var(bx * BR_H + wg * 64 + t // 32 * 16)  # the first of this warp's 16 rows
    init_rows(o, m, l, dim)
    first_tile(0, 0, dim, masked)
    for j in T.serial(tiles):
        st, phase = T.meta_var(j % STAGES), T.meta_var(j // STAGES % 2)
        nst, nphase = T.meta_var((j + 1) % STAGES), T.meta_var((j + 1) // STAGES % 2)
        T.cuda.mbarrier_wait(bars.ptr_to([V_FULL + st]), phase)
        if j + 1 < tiles:
            T.cuda.mbarrier_wait(bars.ptr_to([K_FULL + nst]), nphase)
            gemm_s(Qs, Ks, s, desc_a, desc_b, nst, wg, dim)
        gemm_o(Vs, o, pf, desc_b, st, dim)
        if j + 1 < tiles:
            T.ptx.wgmma.wait_group.sync.aligned(1)  # S is done; P V may still run
            release(K_EMPTY, nst)
            if masked:
                mask_above_diagonal(s, (j + 1) * BC_H, row0, t % 32, BC_H)
            online_softmax(s, m, l, mx, alpha, BC_H, LOG2E / dim ** 0.5)
        T.ptx.wgmma.wait_group.sync.aligned(0)  # P V is done: O and P's registers are free again
        release(V_EMPTY, st)
        if j + 1 < tiles:
            rescale(o, alpha, dim)
            pack_p(pf, s)
    store_rows(O, o, l, bh, row0, t % 32, dim)


@T.macro(hygienic=False)
def peeled_tile(j, before, dim, masked):
    # S of tile j + 1 and P V of tile j issued together; then the softmax of tile j + 1 while P V runs.
    # before: the K and V tiles the block used before this item (0: a block does one item), as in first_tile
    st, phase = T.meta_var((before + j) % STAGES), T.meta_var((before + j) // STAGES % 2)
    nst, nphase = T.meta_var((before + j + 1) % STAGES), T.meta_var((before + j + 1) // STAGES % 2)
    T.cuda.mbarrier_wait(bars.ptr_to([K_FULL + nst]), nphase)
    T.cuda.mbarrier_wait(bars.ptr_to([V_FULL + st]), phase)
    gemm_s(Qs, Ks, s, desc_a, desc_b, nst, wg, dim)
    gemm_o(Vs, o, pf, desc_b, st, dim)
    T.ptx.wgmma.wait_group.sync.aligned(1)  # S is done; P V may still run
    release(K_EMPTY, nst)
    if masked:
        mask_above_diagonal(s, (j + 1) * BC_H, row0, t % 32, BC_H)
    online_softmax(s, m, l, mx, alpha, BC_H, LOG2E / dim ** 0.5)
    T.ptx.wgmma.wait_group.sync.aligned(0)  # P V is done: O and P's registers are free again
    release(V_EMPTY, st)
    rescale(o, alpha, dim)
    pack_p(pf, s)


@T.macro(hygienic=False)
def consume_peeled(bh, bx, tiles, dim, masked, overlapped_tile=peeled_tile):
    # consume_overlap with the last P V out of the loop: every iteration issues the same two groups
    wg, t = T.meta_var(warpgroup - 1), T.meta_var(tid % 128)  # the consumer warpgroup, its thread
    row0 = T.meta_var(bx * BR_H + wg * 64 + t // 32 * 16)  # the first of this warp's 16 rows
    init_rows(o, m, l, dim)
    first_tile(0, 0, dim, masked)
    for j in T.serial(tiles - 2 if masked else tiles - 1):  # causal: the diagonal tile's S after the loop too
        overlapped_tile(j, 0, dim, False)
    if masked and tiles >= 2:
        overlapped_tile(tiles - 2, 0, dim, True)
    st, phase = T.meta_var((tiles - 1) % STAGES), T.meta_var((tiles - 1) // STAGES % 2)
    T.cuda.mbarrier_wait(bars.ptr_to([V_FULL + st]), phase)
    gemm_o(Vs, o, pf, desc_b, st, dim)
    T.ptx.wgmma.wait_group.sync.aligned(0)
    release(V_EMPTY, st)
    store_rows(O, o, l, bh, row0, t % 32, dim)
