"""What reading the cache costs, flushed as the notebook flushes: the ceiling for a decode kernel is a read.

12's sweep divides the staged kernel's time by the copy of the same bytes (`clone` of half of them): the
copy reads half from DRAM and writes half, and its writes may stay in L2 when its timer stops. A decode
must read every byte. `decode_timeline.py` (H100, d857e42) found torch's `sum` over the same bytes as slow
as our kernel (1x8k 25.8 us a call against ours 25.6 and the copy's 16.8). Is `sum` a good read? Here a
read written for it: `read_words`, every thread a 16-byte load of each of 8 strides in flight, XOR-ed into
one word a thread (checked: the XOR of its output is the XOR of the input).

At each shape: ours (12's staged kernel, `plan_one_wave` for 2 an SM), the copy of the same bytes, torch's
`sum` and `read_words`; timed as the notebook times (each call alone after a flush, held, 10 calls a round;
back to back from 4x L2 up), in 9 rounds that take each in turn; then all four again with L2 flushed by
reading (a `sum` over the flush buffer: L2 left clean), so that what the write flush charges shows.
Median us a call, and the copy's time over each (the "% of the copy" of the sweep).

Result (H100, 98ae2f2, `results/decode_read.nvidia-h100.txt`), write flush, copy's time over each: 1x8k ours
0.63, `sum` 0.67, `read_words` 0.83; 8x1k 0.64 / 0.66 / 0.82; 1x32k 0.77 / 0.80 / 0.87; 32x1k 0.82 / 0.81 / 0.87;
the read flush moves every kernel alike (1x8k 0.59 / 0.61 / 0.83). At 32x8k (1 GB, back to back) ours, the copy
and `sum` 1.00, `read_words` 1.03. So no kernel that reads every byte reaches 85% of the copy at 1x8k or 8x1k.

    python gpu/experiments/decode_read.py [BxN ...]      (N in k; default the small shapes, and 32x8k)
"""

import statistics
import sys

import numpy as np
from tvm.script import tirx as T

import helpers
from helpers import baselines, bench, decode, kernels
from helpers.decode_mma import decode_paged_mma_async

SHAPES = [(1, 8192), (8, 1024), (1, 32768), (32, 1024), (32, 8192)]
THREADS, UNROLL = 256, 8


def read_words(words, blocks):
    """out[i] = the XOR of every (blocks x THREADS)-th 16 bytes of A from thread i's: a read of all of A,
    UNROLL 16-byte loads of a thread in flight at once."""
    vectors = words // 4
    turns = -(-vectors // (blocks * THREADS * UNROLL))

    @T.prim_func
    def main(A: T.Buffer((words,), "int32"), out: T.Buffer((blocks * THREADS,), "int32")):
        with T.attr(0, "tirx.device_entry", True):
            bx = T.cta_id([blocks])
            tx = T.thread_id([THREADS])
            acc = T.alloc_local((4,), "int32")
            for x in T.unroll(4):
                acc[x] = T.int32(0)
            for turn in T.serial(turns):
                for u in T.unroll(UNROLL):
                    v = T.meta_var(((turn * UNROLL + u) * blocks + bx) * THREADS + tx)
                    if v < vectors:
                        acc[T.Ramp(0, 1, 4)] = acc[T.Ramp(0, 1, 4)] ^ A[T.Ramp(v * 4, 1, 4)]
            out[bx * THREADS + tx] = acc[0] ^ acc[1] ^ acc[2] ^ acc[3]
    return main


def in_turn(timers, rounds=9):
    """{name: ms a call of each round} for round timers that take turns, each once a round: drift in the
    GPU's clock or power falls on all of them alike."""
    times = {name: [] for name in timers}
    for _ in range(rounds):
        for name, one_round in timers.items():
            times[name].append(one_round())
    return times


def main(shapes):
    import torch

    from decode_balance import build_planned
    from decode_plans import setup

    lesson = helpers.lessons.lesson("12_decoding")
    dev, target, spec, flush_bytes = setup()
    buffer = torch.zeros(flush_bytes // 4, dtype=torch.int32, device="cuda")
    flushes = {"write flush": lambda: buffer.zero_(), "read flush": lambda: buffer.sum()}
    blocks = 4 * spec.sm_count
    print(f"{spec.name}, {spec.sm_count} SMs; median us a call of 9 rounds taking each in turn; copy's time over each")
    for b, n in shapes:
        q = decode.queries(b)
        kv, table, lengths = decode.paged_cache([n] * b)
        ref = decode.reference_paged(q, kv, table, lengths)
        nbytes = int(decode.decode_bytes(lengths))
        ours, splits = build_planned(lesson, decode_paged_mma_async, 2, b, n, spec, target)
        args = bench._launch_once(ours, dev, [q, kv, table, lengths, *decode.split_outputs(b, splits)], -1)
        err = bench.relative_error(args[-1].numpy(), ref)
        words = np.random.default_rng(0).integers(-2**31, 2**31, nbytes // 4, dtype=np.int32)
        reader = kernels.build(read_words(words.size, blocks), target, "tirx")
        rargs = bench._launch_once(reader, dev, [words, np.empty(blocks * THREADS, "int32")], -1)
        read_ok = np.bitwise_xor.reduce(rargs[-1].numpy()) == np.bitwise_xor.reduce(words)
        half = torch.empty(nbytes // 4, dtype=torch.float16, device="cuda")
        whole = torch.from_numpy(words.view(np.float16)).cuda()
        calls = {"ours": baselines.on_torch_stream(ours.mod["main"], dev, args), "copy": lambda: half.clone(),
                 "torch sum": lambda: whole.sum(dtype=torch.float32),
                 "read_words": baselines.on_torch_stream(reader.mod["main"], dev, rargs)}
        flushed = nbytes < 4 * spec.l2_bytes
        print(f"  {b}x{n // 1024}k, {nbytes / 1e6:,.1f} MB; ours {splits} splits, error {err:.0e}; "
              f"read_words {'checked' if read_ok else 'WRONG'}; {'flushed' if flushed else 'back to back'}")
        for flush_name, flush in (flushes.items() if flushed else [("not flushed", None)]):
            timers = {name: (baselines.flushed_rounds(call, torch.cuda.Event, torch.cuda.synchronize, flush,
                                                      hold=torch.cuda._sleep) if flush else
                             baselines.event_rounds(call, torch.cuda.Event, torch.cuda.synchronize))
                      for name, call in calls.items()}
            med = {name: statistics.median(t) * 1e3 for name, t in in_turn(timers).items()}
            print(f"    {flush_name:11s} " + ", ".join(f"{name} {us:6.1f} us ({med['copy'] / us:.2f})"
                                                      for name, us in med.items()), flush=True)


if __name__ == "__main__":
    from decode_balance import parse

    if sys.argv[1:2] == ["build"]:  # no GPU: the read's CUDA for 1x8k's bytes
        k = read_words(33554432 // 4, 528)
        src = kernels.build(k, "sm_90a", "tirx").mod.imports[0].inspect_source()
        print(src[src.find("__global__"):][:1500])
    else:
        main([parse(a) for a in sys.argv[1:]] or SHAPES)
