"""The yardstick, timed fairly: cuBLAS (through torch, else cupy) on the same problem, and the
interleaved comparison behind every "% of cuBLAS" in the course.

cuBLAS's own time moves by a few percent from one run to the next (clocks, temperature, what
ran before), so a ratio of two timings taken minutes apart moves with it. Timing a kernel and
cuBLAS in alternating rounds, in one process, and taking the median of the per-round ratios
lets both see the same GPU at the same moment: the ratio holds still while both times drift.
"""

from __future__ import annotations

import functools
import math
import statistics
import time
from typing import Callable

from .kernels import check_matmul, check_number


def cublas_call(M, N, K, dtype="float32", transpose_b=False, out_dtype=None):
    """(call, Event, sync): one cuBLAS matmul on fresh random operands, torch's (else cupy's)
    CUDA events and synchronize; None if neither is installed. TF32 and reduced-precision sums
    are off, so the fp32 baseline really is fp32. `out_dtype` (e.g. fp32 C from fp16 A and B,
    as a kernel with an fp32 epilogue writes) needs torch's `torch.mm(..., out_dtype=)`."""
    check_matmul(M, N, K, dtype=dtype, out_dtype=out_dtype)  # before torch makes any operand
    out_dtype = out_dtype if out_dtype != dtype else None
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
        dt = getattr(torch, dtype)
        a = torch.randn(M, K, device="cuda", dtype=dt)
        b = torch.randn(N, K, device="cuda", dtype=dt).t() if transpose_b else torch.randn(K, N, device="cuda", dtype=dt)
        c = torch.empty(M, N, device="cuda", dtype=getattr(torch, out_dtype) if out_dtype else dt)
        if out_dtype is None:
            return (lambda: torch.matmul(a, b, out=c)), torch.cuda.Event, torch.cuda.synchronize
        try:
            torch.mm(a, b, out_dtype=c.dtype, out=c)
        except TypeError as err:  # torch.mm has out_dtype since torch 2.8
            raise RuntimeError(f"torch {torch.__version__} cannot write {out_dtype} C from {dtype} A and B "
                               f"(torch.mm has no out_dtype): {err}") from None
        return (lambda: torch.mm(a, b, out_dtype=c.dtype, out=c)), torch.cuda.Event, torch.cuda.synchronize
    try:
        import cupy
    except ImportError:
        return None
    if out_dtype is not None:  # only torch writes C in another type than A and B
        return None
    a = cupy.random.randn(M, K).astype(dtype)
    b = cupy.random.randn(N, K).astype(dtype).T if transpose_b else cupy.random.randn(K, N).astype(dtype)
    c = cupy.empty((M, N), dtype=dtype)
    return (lambda: cupy.matmul(a, b, out=c)), (lambda **_: cupy.cuda.Event()), cupy.cuda.Device().synchronize


def torch_call(fn, arrays):
    """(call, Event, sync): `fn(torch, *tensors)` on GPU copies of the NumPy `arrays`, with torch's
    CUDA events and synchronize; None without torch. `fn` gets the module as its first argument,
    so a notebook can name a torch operation without importing torch where there is none."""
    try:
        import torch
    except ImportError:
        return None
    tensors = [torch.from_numpy(a).cuda() for a in arrays]
    return (lambda: fn(torch, *tensors)), torch.cuda.Event, torch.cuda.synchronize


@functools.cache
def torch_flush(nbytes: int) -> Callable[[], None]:
    """A function that writes `nbytes` of a torch buffer on the GPU (zeros), evicting what L2 held;
    one buffer per size, shared by every measurement that flushes."""
    import torch

    buffer = torch.empty(int(nbytes) // 4, dtype=torch.int32, device="cuda")
    return lambda: buffer.zero_()


def torch_flushed_rounds(call, flush_bytes: int) -> Callable[[], float]:
    """`flushed_rounds` for a call launched on torch's current stream (a torch operation, or a TVM
    function wrapped by `on_torch_stream`), with torch's events, flush and hold: the kernel and its
    baseline timed the same way."""
    import torch

    return flushed_rounds(call, torch.cuda.Event, torch.cuda.synchronize, torch_flush(int(flush_bytes)),
                          hold=torch.cuda._sleep)


def cublas_time(M, N, K, dtype="float32", transpose_b=False, repeat=20, warmup=3) -> float | None:
    """Median ms of one cuBLAS matmul (torch, else cupy); None without either."""
    check_number("repeat", repeat)
    check_number("warmup", warmup, zero=True)
    found = cublas_call(M, N, K, dtype, transpose_b)
    return None if found is None else event_median_ms(*found, repeat, warmup)


def event_rounds(call, Event, sync, warmup: int = 3) -> Callable[[], float]:
    """A function that times one round of `call` with device events and returns ms per call; a
    round repeats the call for at least 10 ms, so that launch jitter averages out."""
    inner = _calls_per_round(call, Event, sync, warmup)

    def calls():
        for _ in range(inner):
            call()

    return _round_timer(calls, inner, Event, sync)


def flushed_rounds(call, Event, sync, flush, calls: int = 10, warmup: int = 3, hold=None) -> Callable[[], float]:
    """Like `event_rounds`, for data that fits in L2: each call is timed alone, right after `flush()`
    (which writes a buffer larger than L2), so every call reads its data from DRAM as it would in a
    model where other work ran in between. ms per call, the mean of `calls` such calls.

    A call that takes 10-30 us on the GPU takes about as long to launch from Python, so a call
    launched after its flush has finished would start late, and the gap would be timed with it.
    `hold(cycles)` (torch.cuda._sleep) keeps the GPU busy while the host queues the whole round:
    each call then starts the moment its flush ends, whoever launches it (torch or TVM), and the
    events time the kernel alone. A round the host took longer to queue than the hold lasted is
    run again with a longer hold."""
    for _ in range(warmup):
        call()
    starts, ends = [Event(enable_timing=True) for _ in range(calls)], [Event(enable_timing=True) for _ in range(calls)]
    held = [Event(enable_timing=True), Event(enable_timing=True)]
    cycles = [1 << 21]  # about 1 ms at 2 GHz; grown where the host needs longer

    def queue_round() -> float:
        """Queue the round behind the hold; ms the host took to queue it."""
        if hold is not None:
            held[0].record()
            hold(cycles[0])
            held[1].record()
        began = time.perf_counter()
        for start, end in zip(starts, ends):
            flush()
            start.record()
            call()
            end.record()
        return (time.perf_counter() - began) * 1e3

    def one_round() -> float:
        for _ in range(8):
            queued = queue_round()
            sync()
            slept = _elapsed(*held) if hold is not None else math.inf
            if slept > queued:
                return sum(_elapsed(s, e) for s, e in zip(starts, ends)) / calls
            cycles[0] = int(cycles[0] * 2 * queued / max(slept, 1e-3))
        raise RuntimeError(f"the host took {queued:.1f} ms to queue {calls} calls, longer than the GPU was held "
                           f"({slept:.1f} ms): the calls were not timed alone")

    return one_round


def _round_timer(run, calls: int, Event, sync) -> Callable[[], float]:
    """A function that times `run()` (which makes `calls` calls) with device events: ms per call."""
    start, end = Event(enable_timing=True), Event(enable_timing=True)

    def one_round() -> float:
        start.record()
        run()
        end.record()
        sync()
        return _elapsed(start, end) / calls

    return one_round


def _calls_per_round(call, Event, sync, warmup: int) -> int:
    """Warm up, then time one call: how many calls make a round of at least 10 ms."""
    for _ in range(warmup):
        call()
    sync()
    start, end = Event(enable_timing=True), Event(enable_timing=True)
    start.record()
    call()
    end.record()
    sync()
    return max(1, math.ceil(10.0 / max(_elapsed(start, end), 1e-3)))


def graph_rounds(call, warmup: int = 3) -> Callable[[], float]:
    """Like `event_rounds`, for a torch `call`, with a round's calls captured once in a CUDA graph
    and replayed: the GPU runs them back to back, with no Python between them. A problem that
    takes a few microseconds on the GPU takes longer than that to dispatch from Python, so timed
    call by call it would measure the dispatch, not cuBLAS; the graph takes the dispatch away."""
    import torch

    Event, sync = torch.cuda.Event, torch.cuda.synchronize
    inner = _calls_per_round(call, Event, sync, warmup)
    side = torch.cuda.Stream()  # warm up on a side stream before capturing, as torch asks
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        call()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(inner):
            call()
    graph.replay()
    sync()
    return _round_timer(graph.replay, inner, Event, sync)


def on_torch_stream(f, dev, args) -> Callable[[], None]:
    """A call of the TVM function `f` on `args` that launches on torch's current stream, so that
    `graph_rounds` can capture it as it captures cuBLAS: TVM launches on the stream tvm_ffi names
    for the device, which is otherwise its own. (On the H100, 2026-11-25, a TVM kernel captured
    this way after a cuBLAS graph was timed hit an illegal address; captured first, it ran: so
    gpu/experiments/07_hopper.py's `small` captures it first, and the notebooks do not use it.)"""
    import torch
    import tvm_ffi

    def call():
        with tvm_ffi.use_raw_stream(dev, torch.cuda.current_stream().cuda_stream):
            f(*args)

    return call


def event_median_ms(call, Event, sync, repeat: int, warmup: int) -> float:
    """Median of `repeat` device-event rounds of `call` (see `event_rounds`)."""
    one_round = event_rounds(call, Event, sync, warmup)
    return statistics.median(one_round() for _ in range(repeat))


def interleaved(kernel_round: Callable[[], float], baseline_round: Callable[[], float], rounds: int):
    """Alternate a round of the kernel and a round of the baseline `rounds` times.

    Returns (kernel ms per round, baseline ms per round, median of baseline ms / kernel ms): the
    kernel's speed as a fraction of the baseline's (1.0 = as fast; over 1.0 = faster)."""
    check_number("rounds", rounds)
    kernel, baseline = [], []
    for _ in range(rounds):
        kernel.append(kernel_round())
        baseline.append(baseline_round())
    return kernel, baseline, statistics.median(b / k for k, b in zip(kernel, baseline))


def ratio_quartiles(kernel: list[float], baseline: list[float]) -> list[float] | None:
    """[lower, upper] quartile of the per-round ratios baseline / kernel (None under 4 rounds): the
    spread that says whether a kernel is ahead of its baseline, level with it or behind."""
    if len(kernel) < 4:
        return None
    q1, _, q3 = statistics.quantiles([b / k for k, b in zip(kernel, baseline)], n=4)
    return [q1, q3]


def _elapsed(start, end) -> float:
    if hasattr(start, "elapsed_time"):
        return start.elapsed_time(end)
    import cupy

    return cupy.cuda.get_elapsed_time(start, end)
