"""12's staged tensor-core kernel with the split merge fused in: the last block of a (sequence, KV head) to
finish merges every split's state, and no second kernel runs.

Why: on the H100 (record of 2026-12-07) the shapes of few long sequences read the cache at 64-79% of a copy of
the same bytes (1x8k, 8x1k: 33 MB, 25 us against the copy's 16; 1x32k 79%), SDPA no faster. Those shapes need
many splits (32 at 1x8k), and every split writes (O_s, LSE_s) for `merge_splits`, a second kernel that can only
start once the last block of the first has finished: its launch, its wait, and its 32-deep loop of L2 reads
are on the critical path of a 25 us call. Here each block, after writing its split's state, fences
(`__threadfence`), and one thread counts the block in with `atomicAdd` on a counter a (sequence, KV head); the
block that counts `splits - 1` knows every other split's state is visible, merges the group's heads itself, and
resets the counter to 0 for the next call (the CUDA programming guide's "last block" pattern, as in its
threadFenceReduction sample; FlashDecoding and FlashInfer merge in a second kernel).

What it found (H100, 2026-12-07, `results/decode_fused_merge.nvidia-h100.txt`; both checked, 9e-05 to 2e-04):
nothing. SDPA / ours, merge kernel against merge fused: 1x8k 1.051 [1.049-1.055] / 1.033 [1.031-1.039], 8x1k
1.055 / 1.073, 1x32k 1.010 / 0.996, 8x8k 1.009 / 0.997 (32x1k, one split, 0.995 both). The second kernel is not
what holds 1x8k at 25 us against the copy's 16: the split kernel is (256 keys a block, 4 pages a warp: the
pipeline's fill and the block's merge take a large share of each block's time), and the last block's serial
merge only moves the merge onto the critical path of that block. Not taken into 12.

The kernel is `helpers.decode_mma.decode_paged_mma_async` with one more argument (the counters, zero before the
first call) and this tail; the rest is helpers' macros, unchanged.

    python gpu/experiments/decode_fused_merge.py [BxN ...]     (N in k; default the shapes behind the copy)
"""

import sys

import numpy as np
from tvm.script import tirx as T

from helpers import decode, decode_mma
from helpers.decode import HKV, HQ, D
# (the macros are hygienic=False: the names they use resolve here, where the kernel is parsed)
from helpers.decode_mma import (MMA, PAGE, STAGES, THREADS, WARPS, attend_staged, check_mma_shape, copy_chunk,  # noqa: F401
                                init_warp_state, merge_shared, page_async, share_warp_state, softmax_on_accumulator)
from helpers.lessons.decoding import LOG2E, NEG

SHAPES = [(1, 8192), (8, 1024), (1, 32768), (32, 1024), (8, 8192), (32, 8192)]


@T.macro(hygienic=False)
def merge_last(splits):
    # after this split's (O_s, LSE_s) are written: count the block in; the last of the group merges all splits
    T.cuda.thread_fence()  # this block's writes are visible to every block before it is counted
    T.cuda.cta_sync()
    if tid == 0:
        arrived[0] = T.cuda.atomic_add(T.address_of(count[b, h]), 1)
    T.cuda.cta_sync()
    if arrived[0] == splits - 1:
        T.cuda.thread_fence()
        for jj in T.unroll(heads * D // THREADS):
            hg, d = T.meta_var((jj * THREADS + tid) // D), T.meta_var((jj * THREADS + tid) % D)
            mx[0] = LSE[b, 0, h * heads + hg]
            for s_ in T.serial(1, splits):
                mx[0] = T.max(mx[0], LSE[b, s_, h * heads + hg])
            acc[0] = T.float32(0)
            tot[0] = T.float32(0)
            for s_ in T.serial(splits):
                tot[0] = tot[0] + T.exp2(LSE[b, s_, h * heads + hg] - mx[0])
                acc[0] = acc[0] + T.exp2(LSE[b, s_, h * heads + hg] - mx[0]) * Op[b, s_, h * heads + hg, d]
            O[b, h * heads + hg, d] = T.Cast("float16", acc[0] / tot[0])
        if tid == 0:
            count[b, h] = 0  # ready for the next call


def decode_paged_mma_fused(B, HQ, HKV, D, pages, max_pages, splits, chunk, page=16):
    """`decode_paged_mma_async` with the merge of its splits fused in (`merge_last`): one kernel."""
    heads, scale = check_mma_shape("decode_paged_mma_fused", HQ, HKV, D, chunk, page), LOG2E / D ** 0.5

    @T.prim_func
    def main(Q: T.Buffer((B, HQ, D), "float16"), KV: T.Buffer((pages, 2, HKV, page, D), "float16"),
             table: T.Buffer((B, max_pages), "int32"), lengths: T.Buffer((B,), "int32"),
             Op: T.Buffer((B, splits, HQ, D), "float32"), LSE: T.Buffer((B, splits, HQ), "float32"),
             count: T.Buffer((B, HKV), "int32"), O: T.Buffer((B, HQ, D), "float16")):
        with T.attr(0, "tirx.device_entry", True):
            b, h, sp = T.cta_id([B, HKV, splits])
            tid = T.thread_id([THREADS])
            warp, lane = T.meta_var(tid // 32), T.meta_var(tid % 32)
            g, t = T.meta_var(lane // 4), T.meta_var(lane % 4)
            Q32 = T.decl_buffer((B, HQ, D // 2), "uint32", data=Q.data)
            pool = T.alloc_buffer((WARPS * STAGES * 2 * PAGE * D,), "float16", scope="shared.dyn", align=128)
            KVs = T.decl_buffer((WARPS, STAGES, 2, PAGE, D), "float16", data=pool.data, scope="shared.dyn")
            qa = T.alloc_local((16,), "uint32")
            kf, vf, pf, zero = [T.alloc_local((n_,), "uint32") for n_ in (4, 4, 2, 1)]
            s = T.alloc_local((8,), "float32")
            o = T.alloc_local((32,), "float32")
            m, l, mn, alpha, a2 = [T.alloc_local((1,), "float32") for _ in range(5)]
            acc, tot, mx = [T.alloc_local((1,), "float32") for _ in range(3)]
            sm, sl = [T.alloc_buffer((WARPS, 8), "float32", scope="shared") for _ in range(2)]
            arrived = T.alloc_buffer((1,), "int32", scope="shared")
            so = T.decl_buffer((WARPS, 8, D), "float32", data=pool.data, scope="shared.dyn")
            n = T.meta_var(T.min(chunk, T.max(lengths[b] - sp * chunk, 0)))
            tiles = T.meta_var((n + PAGE - 1) // PAGE)
            zero[0] = T.uint32(0)
            for kk in T.unroll(8):
                for e in T.unroll(2):
                    qa[kk * 2 + e] = T.if_then_else(g < heads, Q32[b, h * heads + T.min(g, heads - 1), kk * 8 + e * 4 + t],
                                                    T.uint32(0))
            init_warp_state()
            for p in T.unroll(STAGES - 1):
                page_async(p * WARPS + warp, p)
            for it in T.serial((tiles + WARPS - 1) // WARPS):
                page_async((it + STAGES - 1) * WARPS + warp, (it + STAGES - 1) % STAGES)
                T.ptx["cp.async.wait_group"](STAGES - 1)
                T.cuda.warp_sync()
                attend_staged(it * WARPS + warp, it % STAGES, scale)
                T.cuda.warp_sync()
            T.cuda.cta_sync()
            share_warp_state()
            if t * 2 < heads:
                for i in T.unroll(8):
                    for r in T.unroll(2):
                        for e in T.unroll(2):
                            so[warp, t * 2 + e, i * 16 + r * 8 + g] = o[i * 4 + r * 2 + e]
            merge_shared()
            if splits > 1:
                merge_last(splits)
    return main


def main(shapes):
    from decode_balance import build_planned, cases
    from decode_one_split import against_sdpa

    walk = cases(shapes)
    lesson, dev, target, spec = next(walk)
    for b, n, q, kv, table, lengths, ref, rounds, sdpa in walk:
        for name, factory in (("staged, merge kernel", decode_mma.decode_paged_mma_async),
                              ("staged, merge fused", decode_paged_mma_fused)):
            ex, splits = build_planned(lesson, factory, 2, b, n, spec, target)
            op, lse, o = decode.split_outputs(b, splits)
            counters = [np.zeros((b, HKV), "int32")] if factory is decode_paged_mma_fused else []
            args = [q, kv, table, lengths, op, lse, *counters, o]
            print(f"    {name}, {b * HKV * splits} blocks, {splits} splits: "
                  + against_sdpa(ex, dev, args, ref, rounds, sdpa), flush=True)


if __name__ == "__main__":
    from decode_balance import parse

    main([parse(a) for a in sys.argv[1:]] or SHAPES)
