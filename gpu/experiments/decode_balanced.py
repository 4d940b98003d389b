"""A plan by blocks, not by sequences: every block of 12's paged kernel takes the same number of keys.

`decode_balance.py` (H200, 2026-11-29) found what holds the one-split shapes behind SDPA there: an SM
with fewer than 3 of the lesson's blocks does not have the bytes in flight for its share of the H200's
bandwidth. 49x8k (392 blocks, 3 an SM) reads the cache at 4.3 TB/s and runs 1.02x SDPA; 32x8k (256
blocks, 2 on most SMs) reads it at 3.9 TB/s (0.91x); 64x8k (512 blocks: a wave of 3 an SM, then one
block on most SMs) at 3.5 (0.81x). `plan_one_wave` cuts every sequence into the same number of splits, so
it cannot give 256 (sequence, KV head) pairs 396 blocks.

Here the plan is FlashInfer's balanced one (Ye et al., 2025, https://arxiv.org/abs/2501.01005): the keys of
all (sequence, KV head) pairs, one after the other, cut into `blocks` runs of equal length (whole pages),
one a block. A run may end one pair and start the next, so a block walks its pieces (a few, listed by the
plan) and writes each one's state (O, log-sum-exp) to the pair's next slot; a pair in one piece writes O
itself, and a second kernel merges the others' pieces (`merge_pieces`, 12's `merge_splits` over each
pair's own count). The kernel is `decode_paged_wave` (4 keys a row, the next step's keys loading while this
step's are scored) with its (b, h, split) taken from the plan instead of the grid.

Run at the sweep's shapes where the H200 trails SDPA and at 64x8k, with `blocks` = 3 an SM (one wave) and
6 an SM (two), each checked against the float64 reference and timed in 9 rounds against SDPA on the same
keys (SDPA's time over ours [quartiles]), beside the lesson's plan.

What it found (H200, 2026-11-29, `results/decode_balanced*.nvidia-h200.txt`): it wins where the lesson's
plan leaves a partial second wave (64x8k 0.786 -> 0.944) and not elsewhere: 32x8k 0.903 -> 0.911, 128x1k
0.895 -> 0.904, and 4-13 points lost where the lesson's plan already fills 3 blocks an SM (8x32k, 8x8k,
32x1k: the pieces, the merge, a first step waiting at each piece). With 3 blocks on every SM, 32x8k reads
4.1 TB/s where SDPA reads 4.5: what is left is a block's bandwidth. `bounds`: 4 blocks an SM with registers
bounded to 128 spill and run at 0.57-0.59.

    python gpu/experiments/decode_balanced.py [BxN ...]      (N in k)
    python gpu/experiments/decode_balanced.py bounds [BxN ...]   (3 an SM, and 4 with registers bounded to 128)
    python gpu/experiments/decode_balanced.py keys8 [BxN ...]    (3 an SM, and 8 keys a row at 2 an SM)
    python gpu/experiments/decode_balanced.py build          (no GPU: the plans and the kernel's registers)
"""

import sys

import numpy as np
from tvm.script import tirx as T

import helpers
from decode_balance import parse
from helpers import decode, decode_steps, kernels
from helpers.decode import HKV, HQ, D, PAGE, check_heads
from helpers.lessons.decoding import LANES, LOG2E, NEG, ROWS, THREADS, VEC, init_state, load_q, merge_rows, share_rows, write_partial

SHAPES = [(32, 8192), (128, 1024), (8, 32768), (64, 8192), (32, 1024), (8, 8192)]


def plan_balanced(lengths, blocks, kv_heads=HKV, page=PAGE):
    """The keys of every (sequence, KV head) pair, pair after pair, cut into runs of the same whole number of
    pages, one a block (`blocks` of them or fewer). Returns (starts, pieces, counts): block j's pieces are
    rows starts[j]:starts[j + 1] of pieces, each (sequence, KV head, first key, keys, slot), the slot being
    the piece's place among its pair's pieces; counts[b, h] is the pair's number of pieces."""
    lengths = np.asarray(lengths, "int64")
    if not lengths.size or lengths.min() < 1 or blocks < 1:
        raise ValueError(f"a plan needs sequences of at least one key and at least one block, got lengths "
                         f"{lengths.tolist()[:4]}... and {blocks} blocks")
    run = -(-int(kv_heads * lengths.sum()) // (blocks * page)) * page  # keys a block
    starts, pieces, counts, filled = [0], [], np.zeros((lengths.size, kv_heads), "int32"), 0
    for b, n in enumerate(lengths.tolist()):
        for h in range(kv_heads):
            first = 0
            while first < n:
                take = min(run - filled, n - first)
                pieces.append((b, h, first, take, counts[b, h]))
                counts[b, h] += 1
                first, filled = first + take, filled + take
                if filled == run:
                    starts.append(len(pieces))
                    filled = 0
    if filled:
        starts.append(len(pieces))
    return np.array(starts, "int32"), np.array(pieces, "int32"), counts


def decode_paged_balanced(B, HQ, HKV, D, pages, max_pages, starts, pieces, counts, page=16, steps=decode_steps):
    """decode_paged_wave with each block's (b, h, split) read from the plan: the block walks its pieces. Its
    keys a row a step, and the macros that take them, are `steps`' (decode_steps, or a copy with more)."""
    heads, scale = check_heads(HQ, HKV, D), LOG2E / D ** 0.5
    KEYS, load_keys, scores_keys, update_keys = steps.KEYS, steps.load_keys, steps.scores_keys, steps.update_keys
    blocks, n_pieces, slots = len(starts) - 1, len(pieces), int(counts.max())

    @T.prim_func
    def main(Q: T.Buffer((B, HQ, D), "float16"), KV: T.Buffer((pages, 2, HKV, page, D), "float16"),
             table: T.Buffer((B, max_pages), "int32"), lengths: T.Buffer((B,), "int32"),
             start: T.Buffer((blocks + 1,), "int32"), piece: T.Buffer((n_pieces, 5), "int32"),
             count: T.Buffer((B, HKV), "int32"), Op: T.Buffer((B, slots, HQ, D), "float32"),
             LSE: T.Buffer((B, slots, HQ), "float32"), O: T.Buffer((B, HQ, D), "float16")):
        with T.attr(0, "tirx.device_entry", True):
            j = T.cta_id([blocks])
            tid = T.thread_id([THREADS])
            row, lane = T.meta_var(tid // LANES), T.meta_var(tid % LANES)
            qf, o = [T.alloc_local((heads * VEC,), "float32") for _ in range(2)]  # registers
            kr, vr, kc, vc = [T.alloc_local((KEYS * VEC,), "float16") for _ in range(4)]  # loading, in use
            s = T.alloc_local((KEYS * heads,), "float32")
            m, l, p, alpha = [T.alloc_local((heads,), "float32") for _ in range(4)]
            acc, tot, mx, mn = [T.alloc_local((1,), "float32") for _ in range(4)]
            sm, sl = [T.alloc_buffer((ROWS, heads), "float32", scope="shared") for _ in range(2)]
            so = T.alloc_buffer((ROWS, heads, D), "float32", scope="shared")
            for x in T.unroll(KEYS * VEC):  # a key past the end is never loaded: weight 0 times 0, not garbage
                kr[x] = T.float16(0)
                vr[x] = T.float16(0)
            for it in T.serial(start[j + 1] - start[j]):  # new: this block's pieces, from the plan
                b, h = T.meta_var(piece[start[j] + it, 0]), T.meta_var(piece[start[j] + it, 1])
                first, n = T.meta_var(piece[start[j] + it, 2]), T.meta_var(piece[start[j] + it, 3])
                load_q(qf, Q, b, h * heads, heads, lane, scale)
                init_state(m, l, o, heads)
                load_keys(kr, vr, KV, table, b, h, first, 0, n, row, lane, page)  # step 0's keys
                for i in T.serial((n + ROWS * KEYS - 1) // (ROWS * KEYS)):
                    for x in T.unroll(KEYS * VEC):
                        kc[x] = kr[x]
                        vc[x] = vr[x]
                    if (i + 1) * ROWS * KEYS < n:
                        load_keys(kr, vr, KV, table, b, h, first + (i + 1) * ROWS * KEYS, (i + 1) * ROWS * KEYS, n,
                                  row, lane, page)
                    scores_keys(s, qf, kc, i * ROWS * KEYS, n, row, heads)
                    update_keys(o, m, l, s, vc, p, alpha, mn, heads)
                share_rows(sm, sl, so, m, l, o, row, lane, heads)
                if count[b, h] == 1:  # the pair is all in this piece: its state is the answer
                    for jj in T.unroll(heads * D // THREADS):
                        g, d = T.meta_var((jj * THREADS + tid) // D), T.meta_var((jj * THREADS + tid) % D)
                        merge_rows(acc, tot, mx, sm, sl, so, g, d)
                        O[b, h * heads + g, d] = T.Cast("float16", acc[0] / tot[0])
                else:
                    write_partial(Op, LSE, acc, tot, mx, sm, sl, so, b, piece[start[j] + it, 4], h * heads, tid,
                                  heads, D)
                T.cuda.cta_sync()  # new: the next piece's share_rows overwrites what this one read
        with T.attr(0, "tirx.device_entry", True):  # kernel 2: the pieces of each pair in more than one
            b, hq = T.cta_id([B, HQ])
            d = T.thread_id([D])
            if count[b, hq // heads] > 1:
                mx2, acc2, tot2 = [T.alloc_local((1,), "float32") for _ in range(3)]
                mx2[0] = T.float32(NEG)
                for sp in T.serial(count[b, hq // heads]):
                    mx2[0] = T.max(mx2[0], LSE[b, sp, hq])
                acc2[0] = T.float32(0)
                tot2[0] = T.float32(0)
                for sp in T.serial(count[b, hq // heads]):
                    tot2[0] = tot2[0] + T.exp2(LSE[b, sp, hq] - mx2[0])
                    acc2[0] = acc2[0] + T.exp2(LSE[b, sp, hq] - mx2[0]) * Op[b, sp, hq, d]
                O[b, hq, d] = T.Cast("float16", acc2[0] / tot2[0])
    return main


def build(b, n, blocks, target, pipeline="tirx", steps=decode_steps):
    """The balanced kernel for b sequences of n keys and `blocks` blocks, with its plan's arrays."""
    starts, pieces, counts = plan_balanced([n] * b, blocks)
    kernel = decode_paged_balanced(b, HQ, HKV, D, *decode.pool_size([n] * b), starts, pieces, counts, steps=steps)
    slots = int(counts.max())
    outs = [np.zeros((b, slots, HQ, D), "float32"), np.zeros((b, slots, HQ), "float32"), np.empty((b, HQ, D), "float16")]
    return kernels.build(kernel, target, pipeline), [starts, pieces, counts, *outs], len(starts) - 1, slots


def main(shapes, plans=(("", 3, "tirx", decode_steps), ("", 6, "tirx", decode_steps))):
    """Each shape: the lesson's plan, then the balanced plan with each (label, blocks an SM, pipeline, module of
    the keys a row) of `plans`."""
    from decode_balance import cases
    from decode_one_split import against_sdpa

    walk = cases(shapes)
    lesson, dev, target, spec = next(walk)
    for b, n, q, kv, table, lengths, ref, rounds, sdpa in walk:
        splits, chunk = lesson.plan_one_wave([n] * b, spec.sm_count)
        ex = kernels.build(decode_steps.decode_paged_wave(b, HQ, HKV, D, *decode.pool_size([n] * b), splits, chunk),
                           target, "tirx")
        print(f"    lesson's plan, {b * HKV * splits:5d} blocks: "
              + against_sdpa(ex, dev, [q, kv, table, lengths, *decode.split_outputs(b, splits)], ref, rounds, sdpa),
              flush=True)
        for label, per_sm, pipeline, steps in plans:
            ex, extra, blocks, slots = build(b, n, per_sm * spec.sm_count, target, pipeline, steps)
            print(f"    balanced{label}, {blocks:5d} blocks, up to {slots} pieces a pair: "
                  + against_sdpa(ex, dev, [q, kv, table, lengths, *extra], ref, rounds, sdpa), flush=True)


def build_report():
    """(No GPU.) Each shape's plan at 3 blocks an SM of 132, and the kernel's registers as ptxas reports them."""
    for b, n in SHAPES:
        ex, (starts, pieces, *_), blocks, slots = build(b, n, 3 * 132, "sm_90a")
        regs = ", ".join(f"{r.registers} registers, {r.spill_stores} bytes spilled" for r in helpers.ptxas_report(ex, "sm_90a"))
        print(f"{b}x{n // 1024}k: {blocks} blocks of {pieces[:starts[1], 3].sum()} keys, {len(pieces)} pieces, up to "
              f"{slots} a pair; {regs}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["build"]:
        build_report()
    elif sys.argv[1:2] == ["bounds"]:  # 4 blocks an SM: registers bounded to 128 (192 bytes spilled)
        from mma_fp16 import min_blocks_pipeline
        main([parse(a) for a in sys.argv[2:]] or SHAPES[:4],
             (("", 3, "tirx", decode_steps), (", 4 an SM (128 registers)", 4, min_blocks_pipeline(4, "tirx"), decode_steps)))
    elif sys.argv[1:2] == ["keys8"]:  # 8 keys a row (twice the bytes in flight a thread), 2 blocks an SM
        from decode_one_split import steps_with_keys
        main([parse(a) for a in sys.argv[2:]] or SHAPES,
             (("", 3, "tirx", decode_steps), (", 8 keys a row, 2 an SM", 2, "tirx", steps_with_keys(8))))
    else:
        main([parse(a) for a in sys.argv[1:]] or SHAPES)
