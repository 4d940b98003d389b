"""The keys a row and the blocks an SM go together (`results/decode_splits.nvidia-h200.txt`): 8 keys a row
hold twice the bytes in flight but 247 registers a thread, so 2 blocks of 128 fit an SM, not 3. 8 keys won
on the H200 where the plan leaves one split and lost where it counted on 3 blocks an SM. Here the plan
counts the blocks that fit: notebook 12's `plan_one_wave` with per_sm = 3 for 4 keys a row (the
lesson) and = 2 for 8 keys a row, at every shape of 12's sweep. Each is checked against the float64
reference, then timed in 9 rounds alternating with SDPA on the same keys (SDPA's time over ours
[quartiles]), as `decode_one_split.compare`.

    python gpu/experiments/decode_pairs.py
"""

import helpers
from decode_one_split import against_sdpa, keys_a_row, sdpa_case
from decode_plans import setup
from helpers import decode, decode_steps, kernels
from helpers.decode import HKV, HQ, D

PAIRS = [(4, 3, decode_steps.decode_paged_wave), (8, 2, keys_a_row(8))]


def main():
    lesson = helpers.lessons.lesson("12_decoding")
    dev, target, spec, flush_bytes = setup()
    print(f"{spec.name}, {spec.sm_count} SMs; medians of 9 rounds against SDPA in the same rounds")
    for b, n in decode.sweep_points():
        q, kv, table, lengths, ref, rounds, sdpa, how = sdpa_case(b, n, spec, flush_bytes)
        print(f"  {how}")
        for keys, per_sm, factory in PAIRS:
            splits, chunk = lesson.plan_one_wave([n] * b, spec.sm_count, per_sm=per_sm)
            ex = kernels.build(factory(b, HQ, HKV, D, *decode.pool_size([n] * b), splits, chunk), target, "tirx")
            args = [q, kv, table, lengths, *decode.split_outputs(b, splits)]
            print(f"    {keys} keys, {per_sm}/SM: {splits:3d} splits of {chunk:6d} "
                  + against_sdpa(ex, dev, args, ref, rounds, sdpa), flush=True)
        del q, kv, table, lengths, ref


if __name__ == "__main__":
    main()
