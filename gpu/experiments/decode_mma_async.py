"""`decode_mma.py`'s kernel with its pages in flight in shared memory, not in registers: cp.async, 3 stages a warp.

`decode_mma.py` (H200, 2026-11-29) put the group's query heads on mma.sync and cut the lesson's instructions
3x, but at the one-split shapes it still trails SDPA by 3-4% (32x8k 0.97, 128x1k 0.96). Its warps wait on
loads, as SDPA's do, and more pages ahead in registers did not help (228 registers, 2 blocks an SM). SDPA
(cuDNN's sdpa_sm80_flash_fprop) copies K and V with cp.async into 85 KB of shared memory a block: bytes in
flight that hold no registers.

Here each warp keeps a ring of 3 page stages (K and V, 8 KiB a page) in shared memory, filled by cp.async
(`cp.async.cg`, 16 bytes a copy, PTX ISA 9.7.9.25), two pages ahead of the one it scores. The fragments come
from shared memory by ldmatrix, as in notebook 10: K's rows as mma's B for S = Q K^T, and V's rows by
`ldmatrix.trans` as V^T's A fragments for O^T = V^T P^T (no movmatrix); each row's 16-byte chunks are stored
XOR-swizzled (chunk c of row r at c ^ r % 8), so the 8 rows of an 8x8 matrix fall on distinct banks. A
warp's stages are its own: it waits for its own groups (`cp.async.wait_group`), then `__syncwarp`.
Q, the softmax on the accumulator and the warps' merge are `decode_mma.py`'s.

    python gpu/experiments/decode_mma_async.py [BxN ...]      (N in k)
    python gpu/experiments/decode_mma_async.py build          (no GPU: registers and shared memory)
"""

import sys

from tvm.script import tirx as T

import helpers
from decode_mma import (MMA, PAGE, SHAPES, THREADS, WARPS, check_mma_shape, decode_paged_mma, init_warp_state,
                        merge_shared, share_warp_state, softmax_on_accumulator)
from helpers import decode, decode_steps, kernels
from helpers.decode import HKV, HQ, D
from helpers.lessons.decoding import LOG2E, NEG, merge_splits  # noqa: F401 (NEG: decode_mma's macros read it here)

STAGES = 3  # a warp's pages in shared memory: the one scored, two in flight


@T.macro(hygienic=False)
def page_async(tile, st):
    # page `tile` of the warp's split, K and V, into stage st by cp.async (one group); zeros past the split's end
    if tile < tiles:
        for i in T.unroll(8):
            r, c = T.meta_var(i * 2 + lane // 16), T.meta_var(lane % 16)
            for which in T.unroll(2):
                if tile * PAGE + r < n:
                    T.ptx["cp.async.cg.shared.global"](KVs.ptr_to([warp, st, which, r, (c ^ r % 8) * 8]),
                                                       KV.ptr_to([table[b, sp * chunk // PAGE + tile], which, h, r, c * 8]), 16)
                else:
                    KVs[warp, st, which, r, T.Ramp((c ^ r % 8) * 8, 1, 8)] = T.Broadcast(T.float16(0), 8)
    T.ptx["cp.async.commit_group"]()  # an empty group past the last page keeps the count


@T.macro(hygienic=False)
def attend_staged(tile, st, scale):
    # decode_mma's attend with K's and V's fragments from stage st by ldmatrix
    if tile < tiles:
        for x in T.unroll(8):
            s[x] = T.float32(0)
        for kk in T.unroll(8):  # S = Q K^T: one ldmatrix.x4 gives both 8-key tiles' B for k-step kk
            r, c = T.meta_var(lane // 16 * 8 + lane % 8), T.meta_var(kk * 2 + lane // 8 % 2)
            T.ptx.ldmatrix.sync.aligned.m8n8.x4.shared.b16(*[kf[x] for x in range(4)],
                                                            KVs.ptr_to([warp, st, 0, r, (c ^ r % 8) * 8]))
            for j in T.unroll(2):
                T.ptx[MMA](s[j * 4], s[j * 4 + 1], s[j * 4 + 2], s[j * 4 + 3], qa[kk * 2], zero[0], qa[kk * 2 + 1],
                           zero[0], kf[j * 2], kf[j * 2 + 1], s[j * 4], s[j * 4 + 1], s[j * 4 + 2], s[j * 4 + 3])
        softmax_on_accumulator(tile, scale)
        for i in T.unroll(8):  # O^T += V^T P^T, dims 16i..16i+15: V's rows transposed by ldmatrix.trans
            r, c = T.meta_var(lane // 16 * 8 + lane % 8), T.meta_var(i * 2 + lane // 8 % 2)
            T.ptx.ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16(vf[0], vf[1], vf[2], vf[3],
                                                                  KVs.ptr_to([warp, st, 1, r, (c ^ r % 8) * 8]))
            T.ptx[MMA](o[i * 4], o[i * 4 + 1], o[i * 4 + 2], o[i * 4 + 3], vf[0], vf[1], vf[2], vf[3], pf[0], pf[1],
                       o[i * 4], o[i * 4 + 1], o[i * 4 + 2], o[i * 4 + 3])


def decode_paged_mma_async(B, HQ, HKV, D, pages, max_pages, splits, chunk, page=16):
    heads, scale = check_mma_shape("decode_paged_mma_async", HQ, HKV, D, chunk, page), LOG2E / D ** 0.5

    @T.prim_func
    def main(Q: T.Buffer((B, HQ, D), "float16"), KV: T.Buffer((pages, 2, HKV, page, D), "float16"),
             table: T.Buffer((B, max_pages), "int32"), lengths: T.Buffer((B,), "int32"),
             Op: T.Buffer((B, splits, HQ, D), "float32"),
             LSE: T.Buffer((B, splits, HQ), "float32"), O: T.Buffer((B, HQ, D), "float16")):
        with T.attr(0, "tirx.device_entry", True):
            b, h, sp = T.cta_id([B, HKV, splits])
            tid = T.thread_id([THREADS])
            warp, lane = T.meta_var(tid // 32), T.meta_var(tid % 32)
            g, t = T.meta_var(lane // 4), T.meta_var(lane % 4)
            Q32 = T.decl_buffer((B, HQ, D // 2), "uint32", data=Q.data)
            pool = T.alloc_buffer((WARPS * STAGES * 2 * PAGE * D,), "float16", scope="shared.dyn", align=128)
            KVs = T.decl_buffer((WARPS, STAGES, 2, PAGE, D), "float16", data=pool.data, scope="shared.dyn")
            qa = T.alloc_local((16,), "uint32")  # Q's A fragments, 8 k-steps x (rows g, g + 8 zero)
            kf, vf, pf, zero = [T.alloc_local((n_,), "uint32") for n_ in (4, 4, 2, 1)]
            s = T.alloc_local((8,), "float32")  # S, two 8-key tiles: (head g, keys 2t, 2t + 1), rows g + 8
            o = T.alloc_local((32,), "float32")  # O^T, 8 tiles of 16 dims: (dims 16i + g (+ 8), heads 2t, 2t + 1)
            m, l, mn, alpha, a2 = [T.alloc_local((1,), "float32") for _ in range(5)]
            acc, tot, mx = [T.alloc_local((1,), "float32") for _ in range(3)]
            sm, sl = [T.alloc_buffer((WARPS, 8), "float32", scope="shared") for _ in range(2)]
            so = T.alloc_buffer((WARPS, 8, D), "float32", scope="shared")
            n = T.meta_var(T.min(chunk, T.max(lengths[b] - sp * chunk, 0)))  # this split's keys
            tiles = T.meta_var((n + PAGE - 1) // PAGE)
            zero[0] = T.uint32(0)
            for kk in T.unroll(8):  # k-step kk: dims 16kk + 2t (+ 1) and 16kk + 8 + 2t (+ 1), head g
                for e in T.unroll(2):
                    qa[kk * 2 + e] = T.if_then_else(g < heads, Q32[b, h * heads + T.min(g, heads - 1), kk * 8 + e * 4 + t],
                                                    T.uint32(0))
            init_warp_state()
            for p in T.unroll(STAGES - 1):  # the warp's first pages on their way
                page_async(p * WARPS + warp, p)
            for it in T.serial((tiles + WARPS - 1) // WARPS):
                page_async((it + STAGES - 1) * WARPS + warp, (it + STAGES - 1) % STAGES)
                T.ptx["cp.async.wait_group"](STAGES - 1)  # this page's group is in; the two after stay in flight
                T.cuda.warp_sync()  # and every lane's copies are seen by the warp
                attend_staged(it * WARPS + warp, it % STAGES, scale)
                T.cuda.warp_sync()  # the stage is read before a later page_async overwrites it
            share_warp_state()
            if t * 2 < heads:
                for i in T.unroll(8):
                    for r in T.unroll(2):
                        for e in T.unroll(2):
                            so[warp, t * 2 + e, i * 16 + r * 8 + g] = o[i * 4 + r * 2 + e]
            merge_shared()
        if splits > 1:
            merge_splits(O, Op, LSE, B, HQ, D, splits)
    return main


VARIANTS = (("lesson's", decode_steps.decode_paged_wave, 3), ("mma, planned for 2 an SM", decode_paged_mma, 2),
            ("mma, cp.async, planned for 2 an SM", decode_paged_mma_async, 2))


def build_report():
    """(No GPU.) ptxas' registers and the shared memory of the kernel at 32x8k."""
    k = decode_paged_mma_async(32, HQ, HKV, D, *decode.pool_size([8192] * 32), 1, 8192)
    for r in helpers.ptxas_report(kernels.build(k, "sm_90a", "tirx"), "sm_90a"):
        print(f"{r.registers} registers, {r.spill_stores} bytes spilled; "
              f"{WARPS * STAGES * 2 * PAGE * D * 2 // 1024} KiB of stages a block")


if __name__ == "__main__":
    from decode_balance import parse
    from decode_mma import main

    if sys.argv[1:2] == ["build"]:
        build_report()
    else:
        main([parse(a) for a in sys.argv[1:]] or SHAPES, VARIANTS)
