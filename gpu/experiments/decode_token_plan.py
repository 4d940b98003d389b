"""On mixed batches, a one-wave plan that cuts every sequence by the longest one's chunk (notebook
12's `plan_one_wave` until 548299f) is slow: the grid is (sequences, KV heads, splits of the
longest), so short sequences leave many blocks empty and the long ones' blocks walk far. A plan
that counts the keys the batch has picks the least chunk (whole pages) whose non-empty blocks, sum
over b of ceil(n_b / chunk) x KV heads, fill one wave; the kernel is the same (a split past a
sequence's end exits at once and writes L = -inf).
On uniform batches the two plans are the same. The study ran at 548299f with the plan written
here; notebook 12's `plan_one_wave` is now that plan (it takes the batch's lengths), so "one wave,
tokens" calls it, and "one wave, longest" is it given the longest length for every sequence.

Each plan of `decode_paged_wave` on each batch is checked against the float64 reference, then
timed in 9 interleaved rounds against the copy of the same bytes, both flushed and held.

    python gpu/experiments/decode_token_plan.py
"""

import numpy as np

import helpers
from decode_plans import against_copy, setup
from helpers import baselines, decode, decode_steps, kernels
from helpers.decode import HKV, HQ, D

BATCHES = {"8 mixed 1-16k": [1, 16384, 8191, 4100, 12000, 8192, 17, 12803],
           "32 of 1-8k": [int(n) for n in np.random.default_rng(5).integers(1, 8192, 32)],
           "64 of 100-2k": [int(n) for n in np.random.default_rng(6).integers(100, 2048, 64)],
           "4 of 1-64k": [65536, 3000, 40000, 700]}


def main():
    nb12 = helpers.lessons.lesson("12_decoding")
    dev, target, spec, flush = setup()
    sms = spec.sm_count
    print(f"{spec.name}; medians of 9 rounds")
    import torch

    for name, lengths in BATCHES.items():
        b, longest = len(lengths), int(max(lengths))
        q = decode.queries(b)
        kv, table, lens = decode.paged_cache(lengths)
        ref = decode.reference_paged(q, kv, table, lens)
        nbytes = decode.decode_bytes(lens)
        src = torch.empty(int(nbytes) // 4, dtype=torch.float16, device="cuda")
        copy = baselines.torch_flushed_rounds(lambda: src.clone(), flush)
        print(f"  {name}: {int(sum(lengths))} keys, {nbytes / 2**20:.0f} MiB")
        for plan_name, (splits, chunk) in [("plan (4/SM, longest)", nb12.plan(b, longest, sms)),
                                           ("one wave, longest", nb12.plan_one_wave([longest] * b, sms)),
                                           ("one wave, tokens", nb12.plan_one_wave(lengths, sms))]:
            busy = HKV * sum(-(-int(n) // chunk) for n in lengths)
            ex = kernels.build(decode_steps.decode_paged_wave(b, HQ, HKV, D, len(kv), table.shape[1], splits, chunk),
                               target, "tirx")
            args = [q, kv, table, lens, *decode.split_outputs(b, splits)]
            print(f"    {plan_name:22s} {splits:3d} splits of {chunk:5d} ({busy:3d} of {b * HKV * splits:4d} blocks busy): "
                  + against_copy(ex, dev, args, ref, copy, flush), flush=True)


if __name__ == "__main__":
    main()
