"""Does the flush itself cost the timed kernel? `baselines.torch_flush` writes zeros over twice L2,
leaving L2 full of dirty lines that the timed kernel's own traffic must write back to DRAM. A flush
that only reads (a sum over the same buffer) leaves L2 clean. On copies of 4-256 MiB each way and
notebook 12's decode at 1x8k and 8x8k: median us of 15 rounds of 10 calls, held (as the notebook
times), with L2 flushed by writing, flushed by reading, and not flushed (which measures L2 where
the data fits in it).

    python gpu/experiments/flush_kind.py
"""

import statistics

import numpy as np

import helpers
from helpers import baselines, bench, decode, kernels


def main():
    import torch

    dev, target, spec = helpers.device(), helpers.make_target(), helpers.local_gpu_spec()
    nbytes = 2 * spec.l2_bytes
    buffer = torch.zeros(nbytes // 4, dtype=torch.int32, device="cuda")
    flushes = {"write flush": lambda: buffer.zero_(), "read flush": lambda: buffer.sum(), "no flush": lambda: None}
    print(f"{spec.name}, flushes of {nbytes >> 20} MiB; median us of 15 rounds of 10 held calls")
    cases = []
    for mib in (4, 32, 128, 256):
        n = mib << 18
        a = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
        ex = kernels.build(kernels.copy_kernel(n, 256, 4), target)
        cases.append((f"copy {mib} MiB each way", ex, bench._launch_once(ex, dev, [a, np.empty_like(a)], -1)))
    plan_one_wave = helpers.lessons.lesson("12_decoding").plan_one_wave
    from helpers.decode_steps import decode_paged_ahead
    for b, n in [(1, 8192), (8, 8192)]:
        splits, chunk = plan_one_wave([n] * b, spec.sm_count)
        kv, table, lengths = decode.paged_cache([n] * b)
        args = [decode.queries(b), kv, table, lengths, *decode.split_outputs(b, splits)]
        ex = kernels.build(decode_paged_ahead(b, decode.HQ, decode.HKV, decode.D, *decode.pool_size([n] * b),
                                              splits, chunk), target, "tirx")
        cases.append((f"decode {b}x{n // 1024}k", ex, bench._launch_once(ex, dev, args, -1)))
    for name, ex, args in cases:
        call = baselines.on_torch_stream(ex.mod["main"], dev, args)
        row = []
        for kind, flush in flushes.items():
            one_round = baselines.flushed_rounds(call, torch.cuda.Event, torch.cuda.synchronize, flush,
                                                 hold=torch.cuda._sleep)
            row.append(f"{kind} {statistics.median(one_round() for _ in range(15)) * 1e3:7.1f}")
        print(f"  {name:24s} " + ", ".join(row))


if __name__ == "__main__":
    main()
