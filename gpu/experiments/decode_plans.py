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


def main():
    import torch

    cut = helpers.lessons.lesson("12_decoding").cut
    dev, target, spec = helpers.device(), helpers.make_target(), helpers.local_gpu_spec()
    flush = 2 * spec.l2_bytes
    print(f"{spec.name}, {spec.sm_count} SMs; medians of 9 rounds, flushed and held")
    for b, n in SHAPES:
        q = decode.queries(b)
        kv, table, lengths = decode.paged_cache([n] * b)
        ref = decode.reference_paged(q, kv, table, lengths)
        nbytes = decode.decode_bytes(lengths)
        src = torch.empty(int(nbytes) // 4, dtype=torch.float16, device="cuda")
        copy = baselines.torch_flushed_rounds(lambda: src.clone(), flush)
        for (splits, chunk), why in plans(b, n, spec.sm_count, cut).items():
            kernel = decode_paged_ahead(b, decode.HQ, HKV, decode.D, *decode.pool_size([n] * b), splits, chunk)
            ex = kernels.build(kernel, target, "tirx")
            args = bench._launch_once(ex, dev, [q, kv, table, lengths, *decode.split_outputs(b, splits)], -1)
            err = bench.relative_error(args[-1].numpy(), ref)
            if not err < 2e-3:
                print(f"  {b}x{n // 1024}k {why}: rel. error {err:.1e}, not timed")
                continue
            ours = baselines.torch_flushed_rounds(baselines.on_torch_stream(ex.mod["main"], dev, args), flush)
            k, c, ratio = baselines.interleaved(ours, copy, 9)
            lo, hi = baselines.ratio_quartiles(k, c)
            print(f"  {b}x{n // 1024}k {why:22s} {splits:3d} splits of {chunk:5d}: {statistics.median(k) * 1e3:6.1f} us,"
                  f" copy {statistics.median(c) * 1e3:5.1f} us, {ratio:.0%} [{lo:.0%}-{hi:.0%}], error {err:.0e}")


if __name__ == "__main__":
    main()
