"""Where a small decode's microseconds go: each kernel's time on the GPU and the gaps between them.

At the sweep's small shapes 12's staged kernel reads the cache at 64-83% of the speed of the copy of the same
bytes (H100 record at d3e8bfd: 1x8k 25.5 us against the copy's 16.3, 8x1k 24.9 / 16.2, 1x32k 63.0 / 49.5,
32x1k 59.0 / 49.3), where issue 45 asks for 85%. A timed call is two kernels (the splits, then
`merge_splits`) where the copy is one, and each block first reads its sequence's length and its page numbers
before its first page. The events that time a call cannot tell those parts apart; CUPTI's trace can.

Each kernel is timed as the notebook times it (flushed, held, 10 calls a round: `baselines.flushed_rounds`),
three rounds under `torch.profiler`, whose trace gives every kernel's start and end on the GPU. Printed for
ours, SDPA, the copy of the same bytes (`clone`, half read, half written) and a read of all of them
(`torch.sum` in fp32, the whole cache read once, as ours reads it): the time the events gave, then medians
over the 30 calls of the gap from the flush's end to the first kernel, each kernel's time, and the gaps
between kernels.

Result (H100, d857e42, `results/decode_timeline.nvidia-h100.txt`): at 1x8k ours is 19.4 us of splits, 1.0 of gap
and 1.9 of merge (25.6 by events); torch's `sum` of the same bytes 20.7 us in its kernel (25.8 by events), the
copy's memcpy 13.8 (16.8). By events ours is within 1-4% of `sum` at all four shapes: a read of every byte
costs about what ours costs, and the copy reads half of them (`decode_read.py` asks for a better read).

    python gpu/experiments/decode_timeline.py [BxN ...]      (N in k; default the four shapes below 85%)
"""

import json
import statistics
import sys
import tempfile
from pathlib import Path

import helpers
from helpers import baselines, bench, decode
from helpers.decode_mma import decode_paged_mma_async

SHAPES = [(1, 8192), (8, 1024), (1, 32768), (32, 1024)]
ROUNDS = 3


def traced(one_round):
    """Kernels (and memsets, memcopies) that `ROUNDS` calls of `one_round` ran: (name, start us, end us) in
    time order, and the events' ms per call of each round."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        ms = [one_round() for _ in range(ROUNDS)]
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        prof.export_chrome_trace(str(Path(tmp) / "trace.json"))
        events = json.loads((Path(tmp) / "trace.json").read_text())["traceEvents"]
    ran = [(e["name"], e["ts"], e["ts"] + e["dur"]) for e in events
           if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    return sorted(ran, key=lambda e: e[1]), ms


def calls(ran, flush_names):
    """`ran` cut at each flush: for every call, the flush's end and the kernels after it (the hold dropped)."""
    out = []
    for name, start, end in ran:
        if name in flush_names:
            out.append((end, []))
        elif out and "spin" not in name and "sleep" not in name:
            out[-1][1].append((name, start, end))
    return [c for c in out if c[1]]


def breakdown(ran, flush_names) -> str:
    """The medians over the calls: flush to first kernel, each kernel, the gaps between them."""
    cs = calls(ran, flush_names)
    if not cs:
        return "no kernels traced"
    n = statistics.median(len(k) for _, k in cs)
    cs = [c for c in cs if len(c[1]) == n]
    parts = [f"{len(cs)} calls; start {statistics.median(k[0][1] - f for f, k in cs):.1f}"]
    for i in range(int(n)):
        if i:
            parts.append(f"gap {statistics.median(k[i][1] - k[i - 1][2] for _, k in cs):.1f}")
        name = cs[0][1][i][0].split("(")[0].split("<")[0][-28:]
        parts.append(f"{name} {statistics.median(k[i][2] - k[i][1] for _, k in cs):.1f}")
    return ", ".join(parts) + " us"


def main(shapes):
    import torch
    from decode_balance import build_planned
    from decode_plans import setup
    from decode_one_split import sdpa_case

    lesson = helpers.lessons.lesson("12_decoding")
    dev, target, spec, flush_bytes = setup()
    flush = baselines.torch_flush(flush_bytes)
    flush_trace, _ = traced(lambda: (flush(), torch.cuda.synchronize(), 0)[2])
    flush_names = {name for name, _, _ in flush_trace}
    print(f"{spec.name}, {spec.sm_count} SMs; flushed calls, {ROUNDS} rounds of 10 traced; flush by {sorted(flush_names)}")
    for b, n in shapes:
        q, kv, table, lengths, ref, rounds, sdpa, how = sdpa_case(b, n, spec, flush_bytes)
        nbytes = decode.decode_bytes(lengths)
        print(f"  {how}; {nbytes / 1e6:,.1f} MB of cache")
        ex, splits = build_planned(lesson, decode_paged_mma_async, 2, b, n, spec, target)
        args = bench._launch_once(ex, dev, [q, kv, table, lengths, *decode.split_outputs(b, splits)], -1)
        err = bench.relative_error(args[-1].numpy(), ref)
        if not err < 2e-3:
            print(f"    staged kernel: rel. error {err:.1e}, not timed")
            continue
        half = torch.empty(int(nbytes) // 4, dtype=torch.float16, device="cuda")
        whole = torch.empty(int(nbytes) // 2, dtype=torch.float16, device="cuda").uniform_()
        timers = {f"staged, {splits} splits (error {err:.0e})": rounds(baselines.on_torch_stream(ex.mod["main"], dev, args)),
                  "SDPA": sdpa, "copy (clone)": rounds(lambda: half.clone()),
                  "read (sum)": rounds(lambda: whole.sum(dtype=torch.float32))}
        for name, one_round in timers.items():
            ran, ms = traced(one_round)
            print(f"    {name}: {statistics.median(ms) * 1e3:.1f} us a call by events; {breakdown(ran, flush_names)}",
                  flush=True)


if __name__ == "__main__":
    from decode_balance import parse

    main([parse(a) for a in sys.argv[1:]] or SHAPES)
