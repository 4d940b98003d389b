"""Are the interleaved rounds fair to both kernels? In notebook 11's record of 2026-11-27, cuDNN's
causal time inside the rounds moved from 1.08 to 1.24 ms with the kernel it alternated with, while
ours stayed at 1.12-1.19 ms: the grouped persistent kernel reads 108% of cuDNN in its rounds, yet
its own time is no better than one block per item's (99%). One explanation: the GPU's clock follows
its power within milliseconds, so a round starts at the clock the round before it left; a kernel
that draws more power slows the baseline's round after it, and its ratio gains.

This times each pairing as `Session.measure` does (a round of ours: TVM's time_evaluator, 20 ms;
a round of cuDNN: `baselines.event_rounds`, 10 ms), once back to back and once with the GPU left
idle for 0.3 s before every round, and reads the SM clock and the power (NVML) as each round ends.

    python gpu/experiments/round_bias.py [sweep | full]

`sweep`: every causal shape of notebook 11's sweep where its rule runs the groups (head dim 128 to
4k tokens, 64 to 8k), with the group the rule picks. `full`: the persistent kernel without the
mask at head dim 128, 2k-16k tokens.
"""

import ctypes
import statistics
import time

import numpy as np
import torch
import tvm

import helpers
from helpers import baselines, flash_hopper_persistent as walk
from helpers.attention import qkv, sdpa
from helpers.bench import time_function

ON_HOPPER = dict(arch="sm_90a", tir_pipeline="tirx")
SHAPES = [(8, 4096, 128, 16), (32, 1024, 128, 8)]  # batch, sequence, head dim, group (None: no mask)
nvml = ctypes.CDLL("libnvidia-ml.so.1")
nvml.nvmlInit_v2()
handle = ctypes.c_void_p()
nvml.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(handle))


def clock_and_power():
    mhz, mw = ctypes.c_uint(), ctypes.c_uint()
    nvml.nvmlDeviceGetClockInfo(handle, 1, ctypes.byref(mhz))  # NVML_CLOCK_SM
    nvml.nvmlDeviceGetPowerUsage(handle, ctypes.byref(mw))
    return mhz.value, mw.value / 1000


def rounds(ours, base, count, rest):
    found = []
    for _ in range(count):
        time.sleep(rest)
        k, k_state = ours(), clock_and_power()
        time.sleep(rest)
        b, b_state = base(), clock_and_power()
        found.append((k, b, k_state, b_state))
    return found


def main():
    nb = helpers.start("11_flash_attention_hopper")
    sms, dev = nb.spec.sm_count, tvm.cuda(0)
    print(f"{nb.spec.name}: each pairing, 15 rounds; ms are medians of rounds, clock (MHz) and power (W) at a round's end")
    for b, n, d, group in SHAPES:
        bh, causal = b * 16, group is not None
        q, k, v = qkv(b, 16, n, d, True)
        tq, tk, tv = (torch.from_numpy(x).cuda() for x in (q, k, v))
        cudnn = sdpa("CUDNN_ATTENTION", b, 16, causal)
        base = baselines.event_rounds(lambda: cudnn(torch, tq, tk, tv), torch.cuda.Event, torch.cuda.synchronize)
        kernels = [("persistent", walk.persistent_flash_attention(bh, n, d, False, sms))] if not causal else [
            ("a block per item", walk.persistent_flash_attention(bh, n, d, True, None)),
            (f"in groups of {group}", walk.persistent_flash_attention(bh, n, d, True, sms, walk.in_groups(bh, group)))]
        for label, kernel in kernels:
            ex = nb.build(kernel, **ON_HOPPER)
            args = [tvm.runtime.tensor(x, dev) for x in (q, k, v, np.zeros_like(q))]
            time_function(ex.mod, dev, args, repeat=1)  # warm up

            def ours():
                return time_function(ex.mod, dev, args, repeat=1, warmup=0)[0]

            for rest in (0.0, 0.3):
                found = rounds(ours, base, 15, rest)
                ratios = sorted(bb / kk for kk, bb, _, _ in found)
                q1, med, q3 = np.percentile(ratios, [25, 50, 75])
                kc, kp = (statistics.mean(r[2][i] for r in found) for i in (0, 1))
                bc, bp = (statistics.mean(r[3][i] for r in found) for i in (0, 1))
                print(f"  {b}x16x{n}x{d}{' causal' if causal else ''}, {label:18s} rest {rest:.1f} s: ours {statistics.median(r[0] for r in found):.4f} ms"
                      f" ({kc:.0f} MHz, {kp:.0f} W), cuDNN {statistics.median(r[1] for r in found):.4f} ms ({bc:.0f} MHz,"
                      f" {bp:.0f} W), ratio {med:.3f} [{q1:.3f}-{q3:.3f}]", flush=True)


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["sweep"]:
        SHAPES = [(32768 // n, n, d, 8 if n == 1024 else 16) for d, top in ((64, 8192), (128, 4096))
                  for n in (512, 1024, 2048, 4096, 8192) if n <= top]
    if sys.argv[1:2] == ["full"]:  # no mask: where 11 says the kernel is ahead (head dim 128, 4k-16k) and just behind
        SHAPES = [(32768 // n, n, 128, None) for n in (2048, 4096, 8192, 16384)]
    main()
