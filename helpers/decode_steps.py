"""Notebook 12's kernels that the lesson shows as diffs rather than in full: the paged kernel (section
3's split-KV kernel reading K and V through a block table), then more bytes in flight: each row
of a block takes KEYS keys a step and issues all their loads before it scores any
(`decode_paged_keys`), then loads the next step's keys while it scores these (`decode_paged_ahead`),
and writes O itself where the plan leaves one split (`decode_paged_wave`: one launch, no merge).
The earlier kernels, their macros and the merge stay in the notebook
(`helpers.lessons.decoding`); these reuse them, so a diff shows exactly what a step adds.

Why: a thread of the paged kernel has 32 bytes of K and V in flight, then waits for them before it
asks for more; with four keys, 128 bytes; with the next four loading during the arithmetic, the
loads of one step overlap the scores of the last (notebook 00's Little's law: bytes in flight =
bandwidth x latency)."""

from tvm.script import tirx as T

from helpers.decode import check_heads
from helpers.lessons.decoding import (LANES, LOG2E, ROWS, THREADS, VEC, init_state, load_q, merge_rows, merge_splits,
                                      online_update, scores, share_rows, write_partial)

__all__ = ["decode_paged", "KEYS", "load_keys", "scores_keys", "update_keys", "decode_paged_keys", "decode_paged_ahead",
           "decode_paged_wave"]

def decode_paged(B, HQ, HKV, D, pages, max_pages, splits, chunk, page=16):
    heads, scale = check_heads(HQ, HKV, D), LOG2E / D ** 0.5
    @T.prim_func
    def main(Q: T.Buffer((B, HQ, D), "float16"), KV: T.Buffer((pages, 2, HKV, page, D), "float16"),
             table: T.Buffer((B, max_pages), "int32"), lengths: T.Buffer((B,), "int32"),
             Op: T.Buffer((B, splits, HQ, D), "float32"),
             LSE: T.Buffer((B, splits, HQ), "float32"), O: T.Buffer((B, HQ, D), "float16")):
        with T.attr(0, "tirx.device_entry", True):
            b, h, sp = T.cta_id([B, HKV, splits])
            tid = T.thread_id([THREADS])
            row, lane = T.meta_var(tid // LANES), T.meta_var(tid % LANES)
            qf, o = [T.alloc_local((heads * VEC,), "float32") for _ in range(2)]  # registers
            kr, vr = [T.alloc_local((VEC,), "float16") for _ in range(2)]
            s, m, l, p, alpha = [T.alloc_local((heads,), "float32") for _ in range(5)]
            acc, tot, mx = [T.alloc_local((1,), "float32") for _ in range(3)]
            sm, sl = [T.alloc_buffer((ROWS, heads), "float32", scope="shared") for _ in range(2)]
            so = T.alloc_buffer((ROWS, heads, D), "float32", scope="shared")
            n = T.meta_var(T.min(chunk, T.max(lengths[b] - sp * chunk, 0)))  # this split's keys of this sequence
            load_q(qf, Q, b, h * heads, heads, lane, scale)
            init_state(m, l, o, heads)
            for i in T.serial((n + ROWS - 1) // ROWS):
                key = T.meta_var(sp * chunk + i * ROWS + row)
                if i * ROWS + row < n:  # the page holding the key, then the key's row in it
                    kr[T.Ramp(0, 1, VEC)] = KV[table[b, key // page], 0, h, key % page, T.Ramp(lane * VEC, 1, VEC)]
                    vr[T.Ramp(0, 1, VEC)] = KV[table[b, key // page], 1, h, key % page, T.Ramp(lane * VEC, 1, VEC)]
                scores(s, qf, kr, heads)  # every lane: the shuffles need the whole warp
                if i * ROWS + row < n:
                    online_update(o, m, l, s, vr, p, alpha, heads)
            share_rows(sm, sl, so, m, l, o, row, lane, heads)
            write_partial(Op, LSE, acc, tot, mx, sm, sl, so, b, sp, h * heads, tid, heads, D)
        merge_splits(O, Op, LSE, B, HQ, D, splits)
    return main


#: keys a row takes per step: 4 x (16 + 16) bytes of K and V in flight a thread
KEYS = 4


@T.macro
def load_keys(kr, vr, KV, table, b, h, first, done, n, row, lane, page):
    # the row's KEYS keys of this step, first + kk * ROWS + row, all loads issued before any is used
    for kk in T.unroll(KEYS):
        if done + kk * ROWS + row < n:  # the split's key done + kk * ROWS + row exists
            kr[T.Ramp(kk * VEC, 1, VEC)] = KV[table[b, (first + kk * ROWS + row) // page], 0, h,
                                              (first + kk * ROWS + row) % page, T.Ramp(lane * VEC, 1, VEC)]
            vr[T.Ramp(kk * VEC, 1, VEC)] = KV[table[b, (first + kk * ROWS + row) // page], 1, h,
                                              (first + kk * ROWS + row) % page, T.Ramp(lane * VEC, 1, VEC)]


@T.macro
def scores_keys(s, qf, kr, done, n, row, heads):
    # scores(...) for KEYS keys; a key past the split's end scores -FLT_MAX, so its weight exp2(s - m) is 0
    for kk in T.unroll(KEYS):
        for g in T.unroll(heads):
            s[kk * heads + g] = T.float32(0)
            for e in T.unroll(VEC):
                s[kk * heads + g] = s[kk * heads + g] + qf[g * VEC + e] * T.Cast("float32", kr[kk * VEC + e])
            s[kk * heads + g] = T.cuda.warp_sum(s[kk * heads + g], LANES)
            s[kk * heads + g] = T.if_then_else(done + kk * ROWS + row < n, s[kk * heads + g], T.min_value("float32"))


@T.macro
def update_keys(o, m, l, s, vr, p, alpha, mn, heads):
    # online_update(...) for KEYS keys at once: one new maximum and one rescale of o a step, not four
    for g in T.unroll(heads):
        mn[0] = m[g]
        for kk in T.unroll(KEYS):
            mn[0] = T.max(mn[0], s[kk * heads + g])
        alpha[g] = T.exp2(m[g] - mn[0])
        m[g] = mn[0]
        l[g] = l[g] * alpha[g]
        for e in T.unroll(VEC):
            o[g * VEC + e] = o[g * VEC + e] * alpha[g]
        for kk in T.unroll(KEYS):
            p[g] = T.exp2(s[kk * heads + g] - mn[0])
            l[g] = l[g] + p[g]
            for e in T.unroll(VEC):
                o[g * VEC + e] = o[g * VEC + e] + p[g] * T.Cast("float32", vr[kk * VEC + e])


def decode_paged_keys(B, HQ, HKV, D, pages, max_pages, splits, chunk, page=16):
    heads, scale = check_heads(HQ, HKV, D), LOG2E / D ** 0.5
    @T.prim_func
    def main(Q: T.Buffer((B, HQ, D), "float16"), KV: T.Buffer((pages, 2, HKV, page, D), "float16"),
             table: T.Buffer((B, max_pages), "int32"), lengths: T.Buffer((B,), "int32"),
             Op: T.Buffer((B, splits, HQ, D), "float32"),
             LSE: T.Buffer((B, splits, HQ), "float32"), O: T.Buffer((B, HQ, D), "float16")):
        with T.attr(0, "tirx.device_entry", True):
            b, h, sp = T.cta_id([B, HKV, splits])
            tid = T.thread_id([THREADS])
            row, lane = T.meta_var(tid // LANES), T.meta_var(tid % LANES)
            qf, o = [T.alloc_local((heads * VEC,), "float32") for _ in range(2)]  # registers
            kr, vr = [T.alloc_local((KEYS * VEC,), "float16") for _ in range(2)]
            s = T.alloc_local((KEYS * heads,), "float32")
            m, l, p, alpha = [T.alloc_local((heads,), "float32") for _ in range(4)]
            acc, tot, mx, mn = [T.alloc_local((1,), "float32") for _ in range(4)]
            sm, sl = [T.alloc_buffer((ROWS, heads), "float32", scope="shared") for _ in range(2)]
            so = T.alloc_buffer((ROWS, heads, D), "float32", scope="shared")
            n = T.meta_var(T.min(chunk, T.max(lengths[b] - sp * chunk, 0)))  # this split's keys of this sequence
            load_q(qf, Q, b, h * heads, heads, lane, scale)
            init_state(m, l, o, heads)
            for x in T.unroll(KEYS * VEC):  # a key past the end is never loaded: weight 0 times 0, not garbage
                kr[x] = T.float16(0)
                vr[x] = T.float16(0)
            for i in T.serial((n + ROWS * KEYS - 1) // (ROWS * KEYS)):  # KEYS keys a row, 32 a block, a step
                load_keys(kr, vr, KV, table, b, h, sp * chunk + i * ROWS * KEYS, i * ROWS * KEYS, n, row, lane, page)
                scores_keys(s, qf, kr, i * ROWS * KEYS, n, row, heads)
                update_keys(o, m, l, s, vr, p, alpha, mn, heads)
            share_rows(sm, sl, so, m, l, o, row, lane, heads)
            write_partial(Op, LSE, acc, tot, mx, sm, sl, so, b, sp, h * heads, tid, heads, D)
        merge_splits(O, Op, LSE, B, HQ, D, splits)
    return main


def decode_paged_ahead(B, HQ, HKV, D, pages, max_pages, splits, chunk, page=16):
    heads, scale = check_heads(HQ, HKV, D), LOG2E / D ** 0.5
    @T.prim_func
    def main(Q: T.Buffer((B, HQ, D), "float16"), KV: T.Buffer((pages, 2, HKV, page, D), "float16"),
             table: T.Buffer((B, max_pages), "int32"), lengths: T.Buffer((B,), "int32"),
             Op: T.Buffer((B, splits, HQ, D), "float32"),
             LSE: T.Buffer((B, splits, HQ), "float32"), O: T.Buffer((B, HQ, D), "float16")):
        with T.attr(0, "tirx.device_entry", True):
            b, h, sp = T.cta_id([B, HKV, splits])
            tid = T.thread_id([THREADS])
            row, lane = T.meta_var(tid // LANES), T.meta_var(tid % LANES)
            qf, o = [T.alloc_local((heads * VEC,), "float32") for _ in range(2)]  # registers
            kr, vr, kc, vc = [T.alloc_local((KEYS * VEC,), "float16") for _ in range(4)]  # loading, in use
            s = T.alloc_local((KEYS * heads,), "float32")
            m, l, p, alpha = [T.alloc_local((heads,), "float32") for _ in range(4)]
            acc, tot, mx, mn = [T.alloc_local((1,), "float32") for _ in range(4)]
            sm, sl = [T.alloc_buffer((ROWS, heads), "float32", scope="shared") for _ in range(2)]
            so = T.alloc_buffer((ROWS, heads, D), "float32", scope="shared")
            n = T.meta_var(T.min(chunk, T.max(lengths[b] - sp * chunk, 0)))  # this split's keys of this sequence
            load_q(qf, Q, b, h * heads, heads, lane, scale)
            init_state(m, l, o, heads)
            for x in T.unroll(KEYS * VEC):  # a key past the end is never loaded: weight 0 times 0, not garbage
                kr[x] = T.float16(0)
                vr[x] = T.float16(0)
            load_keys(kr, vr, KV, table, b, h, sp * chunk, 0, n, row, lane, page)  # step 0's keys
            for i in T.serial((n + ROWS * KEYS - 1) // (ROWS * KEYS)):  # KEYS keys a row, 32 a block, a step
                for x in T.unroll(KEYS * VEC):  # this step's keys move to kc, vc; kr, vr take the next step's
                    kc[x] = kr[x]
                    vc[x] = vr[x]
                if (i + 1) * ROWS * KEYS < n:
                    load_keys(kr, vr, KV, table, b, h, sp * chunk + (i + 1) * ROWS * KEYS, (i + 1) * ROWS * KEYS, n,
                              row, lane, page)
                scores_keys(s, qf, kc, i * ROWS * KEYS, n, row, heads)
                update_keys(o, m, l, s, vc, p, alpha, mn, heads)
            share_rows(sm, sl, so, m, l, o, row, lane, heads)
            write_partial(Op, LSE, acc, tot, mx, sm, sl, so, b, sp, h * heads, tid, heads, D)
        merge_splits(O, Op, LSE, B, HQ, D, splits)
    return main


def decode_paged_wave(B, HQ, HKV, D, pages, max_pages, splits, chunk, page=16):
    heads, scale = check_heads(HQ, HKV, D), LOG2E / D ** 0.5
    @T.prim_func
    def main(Q: T.Buffer((B, HQ, D), "float16"), KV: T.Buffer((pages, 2, HKV, page, D), "float16"),
             table: T.Buffer((B, max_pages), "int32"), lengths: T.Buffer((B,), "int32"),
             Op: T.Buffer((B, splits, HQ, D), "float32"),
             LSE: T.Buffer((B, splits, HQ), "float32"), O: T.Buffer((B, HQ, D), "float16")):
        with T.attr(0, "tirx.device_entry", True):
            b, h, sp = T.cta_id([B, HKV, splits])
            tid = T.thread_id([THREADS])
            row, lane = T.meta_var(tid // LANES), T.meta_var(tid % LANES)
            qf, o = [T.alloc_local((heads * VEC,), "float32") for _ in range(2)]  # registers
            kr, vr, kc, vc = [T.alloc_local((KEYS * VEC,), "float16") for _ in range(4)]  # loading, in use
            s = T.alloc_local((KEYS * heads,), "float32")
            m, l, p, alpha = [T.alloc_local((heads,), "float32") for _ in range(4)]
            acc, tot, mx, mn = [T.alloc_local((1,), "float32") for _ in range(4)]
            sm, sl = [T.alloc_buffer((ROWS, heads), "float32", scope="shared") for _ in range(2)]
            so = T.alloc_buffer((ROWS, heads, D), "float32", scope="shared")
            n = T.meta_var(T.min(chunk, T.max(lengths[b] - sp * chunk, 0)))  # this split's keys of this sequence
            load_q(qf, Q, b, h * heads, heads, lane, scale)
            init_state(m, l, o, heads)
            for x in T.unroll(KEYS * VEC):  # a key past the end is never loaded: weight 0 times 0, not garbage
                kr[x] = T.float16(0)
                vr[x] = T.float16(0)
            load_keys(kr, vr, KV, table, b, h, sp * chunk, 0, n, row, lane, page)  # step 0's keys
            for i in T.serial((n + ROWS * KEYS - 1) // (ROWS * KEYS)):  # KEYS keys a row, 32 a block, a step
                for x in T.unroll(KEYS * VEC):  # this step's keys move to kc, vc; kr, vr take the next step's
                    kc[x] = kr[x]
                    vc[x] = vr[x]
                if (i + 1) * ROWS * KEYS < n:
                    load_keys(kr, vr, KV, table, b, h, sp * chunk + (i + 1) * ROWS * KEYS, (i + 1) * ROWS * KEYS, n,
                              row, lane, page)
                scores_keys(s, qf, kc, i * ROWS * KEYS, n, row, heads)
                update_keys(o, m, l, s, vc, p, alpha, mn, heads)
            share_rows(sm, sl, so, m, l, o, row, lane, heads)
            if splits == 1:  # the plan left one split: its state is the answer, nothing to merge
                for j in T.unroll(heads * D // THREADS):
                    g, d = T.meta_var((j * THREADS + tid) // D), T.meta_var((j * THREADS + tid) % D)
                    merge_rows(acc, tot, mx, sm, sl, so, g, d)
                    O[b, h * heads + g, d] = T.Cast("float16", acc[0] / tot[0])
            else:
                write_partial(Op, LSE, acc, tot, mx, sm, sl, so, b, sp, h * heads, tid, heads, D)
        if splits > 1:  # kernel 2 only where there is something to merge
            merge_splits(O, Op, LSE, B, HQ, D, splits)
    return main
