"""A candidate next step for notebook 12: the merge done by the last block of each (sequence, KV
head) to finish, instead of a second kernel. Each block writes its split's state, makes it visible
(`T.cuda.thread_fence`), and counts itself on an arrival counter (`T.cuda.atomic_add`); the block
that arrives last merges the group's splits and sets the counter back to 0 for the next call. One
launch, and no kernel boundary, where the small caches pay fixed costs (results/decode_plans.txt).

Times it against `decode_paged_ahead` (two kernels) on the sweep's small caches, each checked
against the float64 reference, in 9 interleaved rounds with the copy of the same bytes, flushed and
held as the notebook times them.

    python gpu/experiments/decode_last_block.py
"""

import statistics

import numpy as np
from tvm.script import tirx as T

import helpers
from helpers import baselines, bench, decode, kernels
from helpers.decode import HKV, HQ, D, check_heads
from helpers.decode_steps import KEYS, decode_paged_ahead, load_keys, scores_keys, update_keys
from helpers.lessons.decoding import (LANES, LOG2E, NEG, ROWS, THREADS, VEC, init_state, load_q, share_rows,
                                      write_partial)

SHAPES = [(1, 1024), (1, 8192), (8, 1024), (1, 32768), (32, 1024), (8, 8192)]


def decode_paged_last_merges(B, HQ, HKV, D, pages, max_pages, splits, chunk, page=16):
    heads, scale = check_heads(HQ, HKV, D), LOG2E / D ** 0.5
    @T.prim_func
    def main(Q: T.Buffer((B, HQ, D), "float16"), KV: T.Buffer((pages, 2, HKV, page, D), "float16"),
             table: T.Buffer((B, max_pages), "int32"), lengths: T.Buffer((B,), "int32"),
             Op: T.Buffer((B, splits, HQ, D), "float32"), LSE: T.Buffer((B, splits, HQ), "float32"),
             arrived: T.Buffer((B, HKV), "int32"), O: T.Buffer((B, HQ, D), "float16")):
        with T.attr(0, "tirx.device_entry", True):
            b, h, sp = T.cta_id([B, HKV, splits])
            tid = T.thread_id([THREADS])
            row, lane = T.meta_var(tid // LANES), T.meta_var(tid % LANES)
            qf, o = [T.alloc_local((heads * VEC,), "float32") for _ in range(2)]
            kr, vr, kc, vc = [T.alloc_local((KEYS * VEC,), "float16") for _ in range(4)]
            s = T.alloc_local((KEYS * heads,), "float32")
            m, l, p, alpha = [T.alloc_local((heads,), "float32") for _ in range(4)]
            acc, tot, mx, mn = [T.alloc_local((1,), "float32") for _ in range(4)]
            sm, sl = [T.alloc_buffer((ROWS, heads), "float32", scope="shared") for _ in range(2)]
            so = T.alloc_buffer((ROWS, heads, D), "float32", scope="shared")
            last = T.alloc_buffer((1,), "int32", scope="shared")
            n = T.meta_var(T.min(chunk, T.max(lengths[b] - sp * chunk, 0)))
            load_q(qf, Q, b, h * heads, heads, lane, scale)
            init_state(m, l, o, heads)
            for x in T.unroll(KEYS * VEC):
                kr[x] = T.float16(0)
                vr[x] = T.float16(0)
            load_keys(kr, vr, KV, table, b, h, sp * chunk, 0, n, row, lane, page)
            for i in T.serial((n + ROWS * KEYS - 1) // (ROWS * KEYS)):
                for x in T.unroll(KEYS * VEC):
                    kc[x] = kr[x]
                    vc[x] = vr[x]
                if (i + 1) * ROWS * KEYS < n:
                    load_keys(kr, vr, KV, table, b, h, sp * chunk + (i + 1) * ROWS * KEYS, (i + 1) * ROWS * KEYS, n,
                              row, lane, page)
                scores_keys(s, qf, kc, i * ROWS * KEYS, n, row, heads)
                update_keys(o, m, l, s, vc, p, alpha, mn, heads)
            share_rows(sm, sl, so, m, l, o, row, lane, heads)
            write_partial(Op, LSE, acc, tot, mx, sm, sl, so, b, sp, h * heads, tid, heads, D)
            T.cuda.thread_fence()  # this split's state reaches the GPU before the block counts itself
            T.cuda.cta_sync()
            if tid == 0:
                last[0] = T.cuda.atomic_add(T.address_of(arrived[b, h]), 1)
            T.cuda.cta_sync()
            if last[0] == splits - 1:  # the last block of (b, h): merge the group's splits
                T.cuda.thread_fence()
                for j in T.unroll(heads * D // THREADS):
                    g, d = T.meta_var((j * THREADS + tid) // D), T.meta_var((j * THREADS + tid) % D)
                    mx[0] = T.float32(NEG)
                    for t in T.serial(splits):
                        mx[0] = T.max(mx[0], LSE[b, t, h * heads + g])
                    acc[0] = T.float32(0)
                    tot[0] = T.float32(0)
                    for t in T.serial(splits):
                        tot[0] = tot[0] + T.exp2(LSE[b, t, h * heads + g] - mx[0])
                        acc[0] = acc[0] + T.exp2(LSE[b, t, h * heads + g] - mx[0]) * Op[b, t, h * heads + g, d]
                    O[b, h * heads + g, d] = T.Cast("float16", acc[0] / tot[0])
                if tid == 0:
                    arrived[b, h] = 0  # ready for the next call
    return main


def main():
    import torch

    plan_one_wave = helpers.lessons.lesson("12_decoding").plan_one_wave
    dev, target, spec = helpers.device(), helpers.make_target(), helpers.local_gpu_spec()
    flush = 2 * spec.l2_bytes
    print(f"{spec.name}; plan_one_wave; medians of 9 rounds, flushed and held (8x8k: 256 MiB, flushed too)")
    for b, n in SHAPES:
        splits, chunk = plan_one_wave(b, n, spec.sm_count)
        q = decode.queries(b)
        kv, table, lengths = decode.paged_cache([n] * b)
        ref = decode.reference_paged(q, kv, table, lengths)
        src = torch.empty(int(decode.decode_bytes(lengths)) // 4, dtype=torch.float16, device="cuda")
        copy = baselines.torch_flushed_rounds(lambda: src.clone(), flush)
        shape = (b, HQ, HKV, D, *decode.pool_size([n] * b), splits, chunk)
        outs = decode.split_outputs(b, splits)
        for name, kernel, args in [("two kernels", decode_paged_ahead(*shape), [q, kv, table, lengths, *outs]),
                                   ("last block merges", decode_paged_last_merges(*shape),
                                    [q, kv, table, lengths, *outs[:2], np.zeros((b, HKV), "int32"), outs[2]])]:
            ex = kernels.build(kernel, target, "tirx")
            dev_args = bench._launch_once(ex, dev, args, -1)
            ex.mod["main"](*dev_args)  # a second call: the counters must have been set back to 0
            dev.sync()
            err = bench.relative_error(dev_args[-1].numpy(), ref)
            if not err < 2e-3:
                print(f"  {b}x{n // 1024}k {name}: rel. error {err:.1e}, not timed")
                continue
            ours = baselines.torch_flushed_rounds(baselines.on_torch_stream(ex.mod["main"], dev, dev_args), flush)
            k, c, ratio = baselines.interleaved(ours, copy, 9)
            lo, hi = baselines.ratio_quartiles(k, c)
            print(f"  {b}x{n // 1024}k {name:18s} {splits:3d} splits of {chunk:5d}: {statistics.median(k) * 1e3:6.1f} us,"
                  f" copy {statistics.median(c) * 1e3:5.1f} us, {ratio:.0%} [{lo:.0%}-{hi:.0%}], error {err:.0e}")


if __name__ == "__main__":
    main()
