"""How a flushed timing is taken, old against new, on copies that fit in L2 (issue 44, item 4).

Old: TVM's time_evaluator(cache_flush_bytes=) synchronizes after its flush, so the kernel's time
includes the host's launch; torch's flushed rounds did not wait, but launched each call after the
previous one had been timed. New (`baselines.torch_flushed_rounds`): both launched on torch's
stream behind a hold, each call alone after its flush. Prints median ms of 15 rounds, each side alone
and in interleaved rounds (the ratio torch / TVM with its quartiles).

    python gpu/experiments/flush_timing.py
"""

import statistics

import numpy as np
import torch

import helpers
from helpers import baselines, bench, kernels


def main():
    dev = helpers.device()
    flush = 2 * helpers.local_gpu_spec().l2_bytes
    print(f"{torch.cuda.get_device_name()}, flush {flush >> 20} MiB; median ms of 15 rounds of 10 flushed calls")
    for mib in (4, 32, 128):
        n = mib << 18  # floats
        a = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
        ex = kernels.build(kernels.copy_kernel(n, 256, 4), helpers.make_target())
        args = bench._launch_once(ex, dev, [a, np.empty_like(a)], -1)
        x = torch.from_numpy(a).cuda()
        clone = lambda: x.clone()  # noqa: E731
        rounds = {
            "tvm, time_evaluator": lambda: statistics.mean(
                bench.time_function(ex.mod, dev, args, repeat=10, warmup=0, flush_bytes=flush)),
            "tvm, held": baselines.torch_flushed_rounds(baselines.on_torch_stream(ex.mod["main"], dev, args), flush),
            "torch, unheld": baselines.flushed_rounds(clone, torch.cuda.Event, torch.cuda.synchronize,
                                                      baselines.torch_flush(flush)),
            "torch, held": baselines.torch_flushed_rounds(clone, flush),
        }
        alone = {k: statistics.median(r() for _ in range(15)) for k, r in rounds.items()}
        print(f"{mib} MiB each way, alone: " + ", ".join(f"{k} {v * 1e3:.1f} us" for k, v in alone.items()))
        for old_new, (ours, theirs) in {"old": ("tvm, time_evaluator", "torch, unheld"),
                                        "new": ("tvm, held", "torch, held")}.items():
            k, b, ratio = baselines.interleaved(rounds[ours], rounds[theirs], 15)
            q = baselines.ratio_quartiles(k, b)
            print(f"  {old_new}, interleaved: tvm {statistics.median(k) * 1e3:.1f} us, torch "
                  f"{statistics.median(b) * 1e3:.1f} us, torch/tvm {ratio:.2f} [{q[0]:.2f}-{q[1]:.2f}]")


if __name__ == "__main__":
    main()
