"""What a block of 12's paged kernel waits on, beside SDPA's, where the H200 trails SDPA with one split.

At 32x8k (256 blocks of 128 threads, 2 on most SMs) the lesson's kernel reads the cache at 3.9 TB/s and
SDPA at 4.5 (`decode_balance.py`); with 3 blocks on every SM (`decode_balanced.py`) ours still reads 4.1. A
block of ours holds 4 keys a row in registers and scores them with shuffles across 16 lanes; whether a warp
waits on its loads (long scoreboard) or on the score's shuffle chains (short scoreboard, MIO) decides the
next step: more bytes in flight (TMA pages in shared memory) or the group's 4 query heads on tensor cores
(issue 45's item 4), which turns 4 x 16-lane dot products into one mma a key tile.

`profile` runs `launch KERNEL` under Nsight Compute for: the lesson's kernel (`lesson`: 4 keys a row, 3
blocks an SM), the same with 8 keys a row (`keys8`: 2 an SM), and torch's SDPA (`sdpa`: its best backend,
`enable_gqa`, on the same keys laid out densely), `decode_mma.py`'s kernel (`mma`: scores and P V on
tensor cores) and `decode_mma_async.py`'s (`mma_async`: its pages by cp.async into shared memory), each checked against the float64 reference; then prints
them side by side: time, DRAM throughput, occupancy, issue slots and the warps' top stalls.

What it found (H200, 2026-11-29, `results/decode_profile*.nvidia-h200.txt`): at 32x8k the three have the
same grid (256 x 128) and occupancy (12% of 64 warps), but the lesson's kernel executes 177.4 M instructions
and SDPA (cuDNN's `sdpa_sm80_flash_fprop`, on tensor cores) 37.6 M; the lesson's issue slots are 68% busy
(its top stall is issuing itself), SDPA's 18% (long scoreboard 5.0 cycles an instruction); DRAM 83% of peak
against 92%. 8 keys a row: 167.1 M, 88%. So the lesson's kernel is bound by issuing instructions, and the
group's heads on tensor cores are the step: `decode_mma.py` (58.4 M, 26% busy, 90%).

    python gpu/experiments/decode_profile.py profile [BxN]     (default 32x8; N in k)
    python gpu/experiments/decode_profile.py launch KERNEL [BxN]
"""

import sys

import numpy as np

import helpers
from decode_balance import parse
from decode_one_split import keys_a_row
from helpers import bench, decode, decode_steps, kernels
from helpers.decode import HKV, HQ, D

PROFILED = {"lesson": "main_kernel", "keys8": "main_kernel", "mma": "main_kernel", "mma_async": "main_kernel", "sdpa": "regex:sdpa|flash|fmha|attn|attention"}


def launch(name, b, n):
    """(Run by `profile` under ncu.) Kernel `name` of PROFILED on b sequences of n keys, launched 4 times;
    its relative error against the float64 reference printed."""
    q = decode.queries(b)
    kv, table, lengths = decode.paged_cache([n] * b)
    ref = decode.reference_paged(q, kv, table, lengths)
    if name == "sdpa":
        import torch

        dense = np.stack([decode.gather(kv, table[i], n) for i in range(b)])
        tq, tk, tv = (torch.from_numpy(np.ascontiguousarray(x)).cuda() for x in (q, dense[:, 0], dense[:, 1]))
        for _ in range(4):
            out = decode.sdpa_gqa(torch, tq, tk, tv)
        torch.cuda.synchronize()
        got = out.float().cpu().numpy()
    else:
        per_sm = 2 if name.startswith("mma") else 3  # blocks an SM: 218 or 161 registers and 98.5 KB, or 160 registers
        splits, chunk = helpers.lessons.lesson("12_decoding").plan_one_wave([n] * b, helpers.local_gpu_spec().sm_count,
                                                                            per_sm=per_sm)
        from helpers.decode_mma import decode_paged_mma, decode_paged_mma_async

        factory = {"lesson": decode_steps.decode_paged_wave, "keys8": keys_a_row(8), "mma": decode_paged_mma,
                   "mma_async": decode_paged_mma_async}[name]
        ex = kernels.build(factory(b, HQ, HKV, D, *decode.pool_size([n] * b), splits, chunk), helpers.make_target(), "tirx")
        args = bench._launch_once(ex, helpers.device(), [q, kv, table, lengths, *decode.split_outputs(b, splits)], -1)
        for _ in range(3):
            ex.mod["main"](*args)
        helpers.device().sync()
        got = args[-1].numpy()
    print(f"{name}: relative error {bench.relative_error(got, ref):.1e}")


def profile(b, n):
    """The three kernels of PROFILED under Nsight Compute, side by side."""
    from ncu import NCU_MENTIONED, ncu_first, ncu_rows, ncu_stalls, profile_side_by_side

    memory = {
        "DRAM read (MB)": lambda m: ncu_first(m, "dram__bytes_read.sum", scale=1e-6, fmt="{:,.0f}"),
        "L1 throughput (% of peak)": lambda m: ncu_first(m, "l1tex__throughput.avg.pct_of_peak_sustained_active"),
        "top 6 stalls": lambda m: ncu_stalls(m, 6),
    }
    return profile_side_by_side(__file__, list(PROFILED), {**ncu_rows(4.0 * b * HQ * n * D, {}), **memory},
                                f"decode {b}x{n}, {HQ} query heads on {HKV} KV heads, d={D}",
                                ("dram__", "pipe", "stalled", *NCU_MENTIONED), (f"{b}x{n // 1024}",), PROFILED)


if __name__ == "__main__":
    if sys.argv[1:2] == ["launch"]:
        launch(sys.argv[2], *parse(sys.argv[3] if sys.argv[3:] else "32x8"))
    else:
        sys.exit(profile(*parse(sys.argv[2] if sys.argv[2:] else "32x8")))
