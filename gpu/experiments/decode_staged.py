"""A candidate next step for notebook 12: K and V staged in shared memory by `cp.async`
(`decode_paged_staged`, below) instead of held in registers (`decode_paged_ahead`). Each
thread copies its own keys and reads back only what it copied, so the pipeline needs no barrier;
with STAGES steps of 32 keys in shared memory, STAGES - 1 of them are in flight while one is
scored, and the registers that held the next keys are free (127 a thread instead of 159).

On every point of the sweep, each kernel under `plan_one_wave`'s rule with 3 or 4 blocks an SM is
checked against the float64 reference, then timed in 9 interleaved rounds against the copy of the
same bytes, flushed and held as the notebook times them. Prints ms, the copy's ms and the ratio
copy / ours [quartiles].

    python gpu/experiments/decode_staged.py [batch x context, e.g. 1x8k ...]
"""

import sys

from tvm.script import tirx as T

import helpers
from decode_plans import against_copy, case, one_wave, setup
from helpers import decode, decode_steps, kernels
from helpers.decode import HKV, HQ, D, check_heads
from helpers.decode_steps import KEYS, scores_keys, update_keys
from helpers.lessons.decoding import (LANES, LOG2E, ROWS, THREADS, VEC, init_state, load_q, merge_splits, share_rows,
                                      write_partial)


#: steps of keys in shared memory: the one in use and STAGES - 1 on their way
STAGES = 4


@T.macro
def copy_keys(KVs, st, KV, table, b, h, first, done, n, row, lane, page):
    # load_keys by cp.async: the row's KEYS keys of a step into stage st of shared memory, no registers
    # held while they travel; one commit group a step, empty past the split's end
    for kk in T.unroll(KEYS):
        if done + kk * ROWS + row < n:
            for kv in T.unroll(2):  # K, then V
                T.ptx["cp.async.cg.shared.global"](
                    KVs.ptr_to([st, kv, kk * ROWS + row, lane * VEC]),
                    KV.ptr_to([table[b, (first + kk * ROWS + row) // page], kv, h, (first + kk * ROWS + row) % page,
                               lane * VEC]), 16)
    T.ptx["cp.async.commit_group"]()


def decode_paged_staged(B, HQ, HKV, D, pages, max_pages, splits, chunk, page=16):
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
            kc, vc = [T.alloc_local((KEYS * VEC,), "float16") for _ in range(2)]  # the step in use
            s = T.alloc_local((KEYS * heads,), "float32")
            m, l, p, alpha = [T.alloc_local((heads,), "float32") for _ in range(4)]
            acc, tot, mx, mn = [T.alloc_local((1,), "float32") for _ in range(4)]
            sm, sl = [T.alloc_buffer((ROWS, heads), "float32", scope="shared") for _ in range(2)]
            pool = T.alloc_buffer((STAGES * 2 * ROWS * KEYS * D,), "float16", scope="shared.dyn", align=128)
            KVs = T.decl_buffer((STAGES, 2, ROWS * KEYS, D), "float16", data=pool.data, scope="shared.dyn")
            so = T.decl_buffer((ROWS, heads, D), "float32", data=pool.data, scope="shared.dyn")  # after the loop
            n = T.meta_var(T.min(chunk, T.max(lengths[b] - sp * chunk, 0)))  # this split's keys of this sequence
            for st in T.unroll(STAGES):  # a thread reads back only what it copied: no barrier until the end
                for kk in T.unroll(KEYS):
                    for kv in T.unroll(2):  # a key past the end is never copied: weight 0 times 0, not garbage
                        KVs[st, kv, kk * ROWS + row, T.Ramp(lane * VEC, 1, VEC)] = T.Broadcast(T.float16(0), VEC)
            for st in T.unroll(STAGES - 1):  # the first STAGES - 1 steps' keys on their way
                copy_keys(KVs, st, KV, table, b, h, sp * chunk + st * ROWS * KEYS, st * ROWS * KEYS, n, row, lane,
                          page)
            load_q(qf, Q, b, h * heads, heads, lane, scale)
            init_state(m, l, o, heads)
            for i in T.serial((n + ROWS * KEYS - 1) // (ROWS * KEYS)):  # KEYS keys a row, 32 a block, a step
                copy_keys(KVs, (i + STAGES - 1) % STAGES, KV, table, b, h, sp * chunk + (i + STAGES - 1) * ROWS * KEYS,
                          (i + STAGES - 1) * ROWS * KEYS, n, row, lane, page)
                T.ptx["cp.async.wait_group"](STAGES - 1)  # step i's copies have landed
                for kk in T.unroll(KEYS):
                    kc[T.Ramp(kk * VEC, 1, VEC)] = KVs[i % STAGES, 0, kk * ROWS + row, T.Ramp(lane * VEC, 1, VEC)]
                    vc[T.Ramp(kk * VEC, 1, VEC)] = KVs[i % STAGES, 1, kk * ROWS + row, T.Ramp(lane * VEC, 1, VEC)]
                scores_keys(s, qf, kc, i * ROWS * KEYS, n, row, heads)
                update_keys(o, m, l, s, vc, p, alpha, mn, heads)
            T.ptx["cp.async.wait_group"](0)
            T.cuda.cta_sync()  # so reuses the stages
            share_rows(sm, sl, so, m, l, o, row, lane, heads)
            write_partial(Op, LSE, acc, tot, mx, sm, sl, so, b, sp, h * heads, tid, heads, D)
        merge_splits(O, Op, LSE, B, HQ, D, splits)
    return main


def variants(cut):
    """(name, kernel factory, plan) for each candidate; STAGES is read when the factory runs."""
    def staged(stages):
        def factory(*shape):
            global STAGES
            STAGES = stages
            return decode_paged_staged(*shape)
        return factory
    return [("registers, 3/SM", decode_steps.decode_paged_ahead, one_wave(3, cut)),
            ("4 stages, 3/SM", staged(4), one_wave(3, cut)),
            ("3 stages, 3/SM", staged(3), one_wave(3, cut)),
            ("3 stages, 4/SM", staged(3), one_wave(4, cut))]


def main(labels):
    cut = helpers.lessons.lesson("12_decoding").cut
    dev, target, spec, flush = setup()
    print(f"{spec.name}, {spec.sm_count} SMs; medians of 9 rounds, flushed and held")
    for b, n in decode.sweep_points():
        if labels and decode.sweep_label(b, n) not in labels:
            continue
        q, kv, table, lengths, ref, copy = case(b, n, flush)
        for name, factory, plan in variants(cut):
            splits, chunk = plan(b, n, spec.sm_count)
            ex = kernels.build(factory(b, HQ, HKV, D, *decode.pool_size([n] * b), splits, chunk), target, "tirx")
            args = [q, kv, table, lengths, *decode.split_outputs(b, splits)]
            print(f"  {decode.sweep_label(b, n):6s} {name:16s} {splits:3d} splits of {chunk:6d}: "
                  + against_copy(ex, dev, args, ref, copy, flush), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
