"""Why the kernels slow down back to back. At 2x16x16384x128 on the H100 (`round_bias.py full`) 11's
persistent kernel took 6.47 ms after 0.3 s idle (1,979 MHz) and 6.94 ms back to back (1,556 MHz, 375 W):
680 against 634 TFLOP/s, on either side of issue 44's 650. What holds the clock down?

Ours (11's sweep's persistent kernel) and cuDNN, each launched back to back for `SECONDS`, with NVML read
every 20 ms: the SM clock, the power drawn against the enforced limit, the temperature, and the clock
event reasons NVML gives (power cap, thermal slowdown, ...). Prints, per kernel, the medians over the
window's second half, the reasons seen and how often, and the TFLOP/s of the launches in that half.

    python gpu/experiments/clock_reasons.py
"""

import ctypes
import statistics
import threading
import time

import numpy as np
import torch
import tvm

import helpers
from helpers import baselines
from helpers.attention import attention_flops, qkv, sdpa
from helpers.bench import time_function

from exp_poly import best
from round_bias import clock_and_power, handle, nvml  # NVML, opened once there

SHAPE, SECONDS = (2, 16, 16384, 128), 4.0
REASONS = {0x1: "idle", 0x2: "application clocks", 0x4: "software power cap", 0x8: "hardware slowdown",
           0x10: "sync boost", 0x20: "software thermal slowdown", 0x40: "hardware thermal slowdown",
           0x80: "hardware power brake", 0x100: "display clock"}


def sample():
    """(SM MHz, W, enforced limit W, deg C, clock event reasons bitmask) now."""
    limit, temp, reasons = ctypes.c_uint(), ctypes.c_uint(), ctypes.c_ulonglong()
    nvml.nvmlDeviceGetEnforcedPowerLimit(handle, ctypes.byref(limit))
    nvml.nvmlDeviceGetTemperature(handle, 0, ctypes.byref(temp))  # NVML_TEMPERATURE_GPU
    nvml.nvmlDeviceGetCurrentClocksEventReasons(handle, ctypes.byref(reasons))
    return *clock_and_power(), limit.value / 1000, temp.value, reasons.value


def under_load(launch, seconds=SECONDS):
    """`launch()` (a round: ours 20 ms of calls by TVM's time_evaluator, cuDNN one call; returns ms a call) back to back for `seconds`, NVML sampled meanwhile: the samples
    and the launches' ms of the window's second half."""
    samples, times, stop = [], [], threading.Event()

    def watch():
        while not stop.is_set():
            samples.append((time.perf_counter(), *sample()))
            time.sleep(0.02)

    time.sleep(1.0)  # start from an idle GPU
    thread = threading.Thread(target=watch)
    t0 = time.perf_counter()
    thread.start()
    while time.perf_counter() - t0 < seconds:
        times.append((time.perf_counter(), launch()))
    stop.set()
    thread.join()
    half = t0 + seconds / 2
    return [s[1:] for s in samples if s[0] >= half], [ms for t, ms in times if t >= half], times[0][1]


def report(label, found, flops):
    samples, ms, first = found
    mhz, w, limit, temp = (statistics.median(s[i] for s in samples) for i in range(4))
    seen = {}
    for s in samples:
        for bit, name in REASONS.items():
            if s[4] & bit:
                seen[name] = seen.get(name, 0) + 1
    reasons = ", ".join(f"{name} {n / len(samples):.0%}" for name, n in seen.items()) or "none"
    t = statistics.median(ms)
    print(f"  {label}: first round {first:.4f} ms ({flops / first / 1e9:.0f} TFLOP/s); second half: {t:.4f} ms"
          f" ({flops / t / 1e9:.0f} TFLOP/s) at {mhz:.0f} MHz, {w:.0f} of {limit:.0f} W, {temp:.0f} C;"
          f" reasons: {reasons}", flush=True)


def main():
    nb = helpers.start("11_flash_attention_hopper")
    dev = tvm.cuda(0)
    b, h, n, d = SHAPE
    flops = attention_flops(b, h, n, d, False)
    q, k, v = qkv(b, h, n, d, True)
    print(f"{nb.spec.name}, {b}x{h}x{n}x{d} fp16, back to back for {SECONDS:.0f} s each; NVML every 20 ms")
    ex = nb.build(best()(b * h, n, d, False), arch="sm_90a", tir_pipeline="tirx")
    args = [tvm.runtime.tensor(x, dev) for x in (q, k, v, np.zeros_like(q))]
    time_function(ex.mod, dev, args, repeat=1)  # warm up
    report("ours ", under_load(lambda: time_function(ex.mod, dev, args, repeat=1, warmup=0)[0]), flops)
    tq, tk, tv = (torch.from_numpy(x).cuda() for x in (q, k, v))
    cudnn = sdpa("CUDNN_ATTENTION", b, h, False)
    cudnn_once = baselines._round_timer(lambda: cudnn(torch, tq, tk, tv), 1, torch.cuda.Event, torch.cuda.synchronize)
    cudnn_once()
    report("cuDNN", under_load(cudnn_once), flops)


if __name__ == "__main__":
    main()
