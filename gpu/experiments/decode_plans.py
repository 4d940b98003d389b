"""Notebook 12's last kernel (`decode_paged_ahead`) on the sweep's small caches under other plans:
how many blocks an SM (3: one wave; 6: two) and the fewest keys a split may hold (256, as
`plan_one_wave`; 128, 64, 32). Each plan is checked against the float64 reference, then timed in 9
interleaved rounds against the copy of the same bytes, both flushed and held as the notebook times
them (`baselines.torch_flushed_rounds`). Prints ms, the copy's ms and the ratio copy / ours [quartiles].

    python gpu/experiments/decode_plans.py
"""

import statistics

import helpers
from helpers import baselines, bench, decode, kernels
from helpers.decode import HKV
from helpers.decode_steps import decode_paged_ahead

SHAPES = [(1, 1024), (1, 8192), (8, 1024), (1, 32768), (32, 1024)]


def plans(b, n, sms, cut):
    found = {}
    for per_sm in (3, 4, 6):
        for least in (256, 128, 64, 32):
            found.setdefault(cut(n, max(1, min(per_sm * sms // (b * HKV), n // least))), f"{per_sm}/SM, >={least} keys")
    return found


def one_wave(per_sm, cut, kv_heads=HKV):
    """The one-wave rule of notebook 12's first `plan_one_wave` for `per_sm` blocks an SM and `kv_heads`
    blocks per sequence and split: (b, n, sms) -> (splits, chunk), as many splits as fill the GPU once,
    none under 256 keys unless that would leave SMs without a block."""
    return lambda b, n, sms: cut(n, max(1, min(per_sm * sms // (b * kv_heads), max(n // 256, sms // (b * kv_heads)))))


def setup():
    """This GPU, its target and spec, and the bytes a flush writes (twice L2)."""
    spec = helpers.local_gpu_spec()
    return helpers.device(), helpers.make_target(), spec, 2 * spec.l2_bytes


def case(b, n, flush):
    """b sequences of n tokens: the query, the paged cache (kv, table, lengths), the float64 reference,
    and a function timing one flushed round of the copy of the same bytes."""
    import torch

    q = decode.queries(b)
    kv, table, lengths = decode.paged_cache([n] * b)
    src = torch.empty(int(decode.decode_bytes(lengths)) // 4, dtype=torch.float16, device="cuda")
    return (q, kv, table, lengths, decode.reference_paged(q, kv, table, lengths),
            baselines.torch_flushed_rounds(lambda: src.clone(), flush))


def main():
    cut = helpers.lessons.lesson("12_decoding").cut
    dev, target, spec, flush = setup()
    print(f"{spec.name}, {spec.sm_count} SMs; medians of 9 rounds, flushed and held")
    for b, n in SHAPES:
        q, kv, table, lengths, ref, copy = case(b, n, flush)
        for (splits, chunk), why in plans(b, n, spec.sm_count, cut).items():
            kernel = decode_paged_ahead(b, decode.HQ, HKV, decode.D, *decode.pool_size([n] * b), splits, chunk)
            ex = kernels.build(kernel, target, "tirx")
            args = [q, kv, table, lengths, *decode.split_outputs(b, splits)]
            print(f"  {b}x{n // 1024}k {why:22s} {splits:3d} splits of {chunk:5d}: "
                  + against_copy(ex, dev, args, ref, copy, flush))


def against_copy(ex, dev, args, ref, copy, flush, calls: int = 1) -> str:
    """Run the built decode `ex` `calls` times on `args`, check its output against `ref`, then time it in 9
    rounds alternating with `copy` (a round function), flushed and held: the line that says how it went."""
    dev_args = bench._launch_once(ex, dev, args, -1)
    for _ in range(calls - 1):
        ex.mod["main"](*dev_args)
    dev.sync()
    err = bench.relative_error(dev_args[-1].numpy(), ref)
    if not err < 2e-3:
        return f"rel. error {err:.1e}, not timed"
    ours = baselines.torch_flushed_rounds(baselines.on_torch_stream(ex.mod["main"], dev, dev_args), flush)
    k, c, ratio = baselines.interleaved(ours, copy, 9)
    lo, hi = baselines.ratio_quartiles(k, c)
    return (f"{statistics.median(k) * 1e3:6.1f} us, copy {statistics.median(c) * 1e3:5.1f} us, "
            f"{ratio:.0%} [{lo:.0%}-{hi:.0%}], error {err:.0e}")

if __name__ == "__main__":
    main()
