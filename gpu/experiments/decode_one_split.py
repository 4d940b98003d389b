"""Where `plan_one_wave` leaves one split (batch 32 and 128 of notebook 12's sweep), the second
kernel merges one state with nothing: `decode_steps.decode_paged_wave` is `decode_paged_ahead`
writing O itself when splits == 1 (one launch, no O_s or L_s through DRAM); for more splits its
CUDA is byte-identical. Each is checked against the float64 reference, then timed in 9 rounds
alternating with torch's SDPA (enable_gqa) on the same keys, as the notebook times them: flushed
and held below 4x L2, else back to back. Prints ms, SDPA's ms and the ratio SDPA / ours [quartiles].

    python gpu/experiments/decode_one_split.py [profile | keys]

`keys`: the one-kernel version with 4 keys a row (the lesson's) against 8.
`profile`: each kernel's own time at 32x1k under torch's profiler (CUPTI), after a flush, so that
the time of each launch (SDPA's backend, our two kernels) is seen apart from the gaps between them.
"""

import inspect
import statistics

import numpy as np

import helpers
from decode_plans import setup
from lesson_code import edited, module_from_source
from helpers import baselines, bench, decode, decode_steps, kernels
from helpers.decode import HKV, HQ, D

SHAPES = [(32, 1024), (128, 1024), (32, 8192), (8, 1024)]


def steps_with_keys(keys):
    """decode_steps' source with its KEYS changed, in a module of its own (a macro keeps the KEYS it was made
    with): its kernels and macros take `keys` keys a row a step."""
    src = edited(inspect.getsource(decode_steps), {"\nKEYS = 4\n": f"\nKEYS = {keys}\n"}, "decode_steps")
    return module_from_source(f"decode_steps_keys{keys}", src)


def keys_a_row(keys):
    """decode_paged_wave with `keys` keys a row a step. At 8: twice the bytes in flight, and more registers a
    thread (2 blocks an SM, not 3)."""
    return steps_with_keys(keys).decode_paged_wave


VARIANTS = [("two kernels (ahead)", decode_steps.decode_paged_ahead), ("wave: O written", decode_steps.decode_paged_wave)]


def sdpa_case(b, n, spec, flush_bytes):
    """b sequences of n tokens: the query, the paged cache (kv, table, lengths), the float64 reference,
    a function making a round timer for a call (flushed and held below 4x L2, else back to back, as the
    notebook times them), SDPA's round timer on the same keys laid out densely, and a line saying how."""
    import torch

    q = decode.queries(b)
    kv, table, lengths = decode.paged_cache([n] * b)
    ref = decode.reference_paged(q, kv, table, lengths)
    flush = flush_bytes if decode.decode_bytes(lengths) < 4 * spec.l2_bytes else 0
    dense = np.stack([decode.gather(kv, table[i], n) for i in range(b)])
    tq, tk, tv = (torch.from_numpy(np.ascontiguousarray(x)).cuda() for x in (q, dense[:, 0], dense[:, 1]))
    del dense

    def rounds(call):
        return (baselines.torch_flushed_rounds(call, flush) if flush
                else baselines.event_rounds(call, torch.cuda.Event, torch.cuda.synchronize))
    err = bench.relative_error(decode.sdpa_gqa(torch, tq, tk, tv).float().cpu().numpy(), ref)
    how = f"{b}x{n // 1024}k, {'flushed' if flush else 'not flushed'}; SDPA error {err:.0e}"
    return q, kv, table, lengths, ref, rounds, rounds(lambda: decode.sdpa_gqa(torch, tq, tk, tv)), how


def against_sdpa(ex, dev, args, ref, rounds, sdpa) -> str:
    """Run the built decode `ex` on `args`, check it against `ref`, then time it in 9 rounds alternating
    with `sdpa` (a round timer): ms, SDPA's ms, the ratio SDPA / ours [quartiles] and the error."""
    dev_args = bench._launch_once(ex, dev, args, -1)
    err = bench.relative_error(dev_args[-1].numpy(), ref)
    if not err < 2e-3:
        return f"rel. error {err:.1e}, not timed"
    ours, theirs, ratio = baselines.interleaved(rounds(baselines.on_torch_stream(ex.mod["main"], dev, dev_args)), sdpa, 9)
    lo, hi = baselines.ratio_quartiles(ours, theirs)
    return (f"{statistics.median(ours) * 1e3:6.1f} us, SDPA {statistics.median(theirs) * 1e3:6.1f} us, "
            f"{ratio:.3f} [{lo:.3f}-{hi:.3f}], error {err:.0e}")


def shuffled(kv, table, lengths):
    """The sweep's cache as it is: pages shuffled through the pool."""
    return kv, table


def compare(variants, shapes):
    """Each (name, kernel factory, cache) of `variants`, at each shape: the factory's kernel on cache(kv, table,
    lengths), checked, and timed in rounds with SDPA on the dense keys; one line each."""
    plan_one_wave = helpers.lessons.lesson("12_decoding").plan_one_wave
    dev, target, spec, flush_bytes = setup()
    print(f"{spec.name}; plan_one_wave; medians of 9 rounds against SDPA in the same rounds")
    for b, n in shapes:
        splits, chunk = plan_one_wave([n] * b, spec.sm_count)
        q, kv, table, lengths, ref, rounds, sdpa, how = sdpa_case(b, n, spec, flush_bytes)
        print(f"  {how}; {splits} splits of {chunk}")
        shape = (b, HQ, HKV, D, *decode.pool_size([n] * b), splits, chunk)
        for name, factory, cache in variants:
            ex = kernels.build(factory(*shape), target, "tirx")
            args = [q, *cache(kv, table, lengths), lengths, *decode.split_outputs(b, splits)]
            print(f"    {name:24s} " + against_sdpa(ex, dev, args, ref, rounds, sdpa), flush=True)


def main():
    compare([(name, factory, shuffled) for name, factory in VARIANTS], SHAPES)


def profile(b=32, n=1024):
    import torch
    from torch.profiler import ProfilerActivity, profile as torch_profile

    plan_one_wave = helpers.lessons.lesson("12_decoding").plan_one_wave
    dev, target, spec, flush_bytes = setup()
    splits, chunk = plan_one_wave([n] * b, spec.sm_count)
    q = decode.queries(b)
    kv, table, lengths = decode.paged_cache([n] * b)
    dense = np.stack([decode.gather(kv, table[i], n) for i in range(b)])
    tq, tk, tv = (torch.from_numpy(np.ascontiguousarray(x)).cuda() for x in (q, dense[:, 0], dense[:, 1]))
    shape = (b, HQ, HKV, D, *decode.pool_size([n] * b), splits, chunk)
    calls = {"sdpa": lambda: decode.sdpa_gqa(torch, tq, tk, tv)}
    for name, factory in [("ahead", decode_steps.decode_paged_ahead), ("wave", decode_steps.decode_paged_wave)]:
        ex = kernels.build(factory(*shape), target, "tirx")
        args = bench._launch_once(ex, dev, [q, kv, table, lengths, *decode.split_outputs(b, splits)], -1)
        calls[name] = baselines.on_torch_stream(ex.mod["main"], dev, args)
    flush = baselines.torch_flush(flush_bytes)
    for name, call in calls.items():
        for _ in range(3):
            call()
        torch.cuda.synchronize()
        with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(20):
                flush()
                call()
            torch.cuda.synchronize()
        print(f"{b}x{n // 1024}k {name}:")
        for e in prof.key_averages():
            if e.device_type.name == "CUDA" and e.count >= 20:
                print(f"   {e.key[:70]:70s} x{e.count}  {e.device_time_total / e.count:7.1f} us")


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["keys"]:  # the wave kernel with 4 and 8 keys a row
        VARIANTS[:] = [("wave, 4 keys a row", decode_steps.decode_paged_wave), ("wave, 8 keys a row", keys_a_row(8))]
    profile() if sys.argv[1:] == ["profile"] else main()
