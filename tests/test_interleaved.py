"""Every "% of cuBLAS" in the course is a ratio timed interleaved: kernel and cuBLAS in alternating
rounds of one process, the median of the per-round ratios. These check that machinery on the CPU
with stand-in clocks, so that each test knows exactly which number must come out."""

import contextlib
import itertools
import statistics
import sys
import types

import numpy as np
import pytest
import tvm

import helpers
from helpers import baselines, bench, records

from conftest import needs_gpu, write_record
from test_gate import ADD, N  # C = A + B on 64 floats, run by TVM's LLVM target


def test_interleaving_alternates_rounds_and_takes_the_median_of_per_round_ratios():
    order = []
    kernel = iter([1.0, 1.0, 10.0])
    blas = iter([2.0, 3.0, 10.0])
    k_times, b_times, ratio = baselines.interleaved(lambda: order.append("k") or next(kernel),
                                                     lambda: order.append("b") or next(blas), 3)
    assert order == ["k", "b"] * 3
    assert (k_times, b_times) == ([1.0, 1.0, 10.0], [2.0, 3.0, 10.0])
    # per-round ratios 2, 3, 1: their median is 2 (the ratio of the medians would say 3)
    assert ratio == 2.0


def test_a_drift_both_timings_share_does_not_move_the_ratio():
    """The GPU slows down 5% a round (a clock settling): both times drift, their ratio does not."""
    drift = itertools.count()
    state = {}

    def kernel():
        state["f"] = 1.05 ** next(drift)
        return 1.25 * state["f"]

    k_times, b_times, ratio = baselines.interleaved(kernel, lambda: 1.0 * state["f"], 9)
    assert ratio == pytest.approx(0.8)
    assert max(k_times) / min(k_times) > 1.4  # while the times themselves moved by 40%


@pytest.mark.parametrize("rounds", [0, -1, 2.5])
def test_interleaving_needs_a_positive_number_of_rounds(rounds):
    with pytest.raises(ValueError, match=f"rounds must be a positive integer, got {rounds!r}"):
        baselines.interleaved(lambda: 1.0, lambda: 1.0, rounds)


class _Clock:
    """Device events over a made-up clock: every call of the timed function takes `ms`."""

    def __init__(self, ms):
        self.now, self.ms, self.calls, self.syncs = 0.0, ms, 0, 0

    def call(self):
        self.calls += 1
        self.now += self.ms

    def sync(self):
        self.syncs += 1

    def Event(self, enable_timing):
        clock = self

        class Event:
            def record(self):
                self.t = clock.now

            def elapsed_time(self, end):
                return end.t - self.t

        assert enable_timing
        return Event()


@pytest.mark.parametrize("ms, inner", [(2.0, 5), (0.3, 34), (25.0, 1)])
def test_a_round_repeats_the_call_for_at_least_10_ms_and_returns_ms_per_call(ms, inner):
    clock = _Clock(ms)
    one_round = baselines.event_rounds(clock.call, clock.Event, clock.sync, warmup=2)
    assert clock.calls == 3  # two warm-up calls, one call to size the rounds
    assert one_round() == pytest.approx(ms)
    assert clock.calls == 3 + inner and inner * ms >= 10.0 and (inner == 1 or (inner - 1) * ms < 10.0)
    assert baselines.event_median_ms(clock.call, clock.Event, clock.sync, repeat=3, warmup=0) == pytest.approx(ms)



def test_a_flushed_round_times_each_call_alone_after_its_flush_and_leaves_the_flush_out():
    clock, flushes = _Clock(0.5), []

    def flush():  # writing a buffer larger than L2 takes time too, outside the timed call
        flushes.append(clock.now)
        clock.now += 3.0

    one_round = baselines.flushed_rounds(clock.call, clock.Event, clock.sync, flush, calls=4, warmup=1)
    assert one_round() == pytest.approx(0.5) and len(flushes) == 4 and clock.calls == 1 + 4


def test_a_flushed_round_is_queued_behind_a_hold_and_queued_again_when_the_hold_was_too_short(monkeypatch):
    """The hold keeps the GPU busy while the host queues the round, so no call waits for its launch.
    A stand-in host that takes 1 ms to queue a call (4 ms a round) against a hold of 2**21 cycles at
    1 cycle/ns (2.1 ms): the round is queued again behind a hold long enough, and its times are the
    calls alone."""
    clock, holds, host = _Clock(0.5), [], [0.0]
    monkeypatch.setattr(baselines.time, "perf_counter", lambda: host[0])

    def hold(cycles):
        holds.append(cycles)
        clock.now += cycles * 1e-6

    def call():
        clock.call()
        host[0] += 1e-3  # one ms of Python per call

    one_round = baselines.flushed_rounds(call, clock.Event, clock.sync, lambda: None, calls=4, warmup=0, hold=hold)
    assert one_round() == pytest.approx(0.5) and clock.syncs == 2
    assert holds[0] == 1 << 21 and holds[1] * 1e-6 > 4.0  # 2.1 ms was short of the host's 4 ms
    assert one_round() == pytest.approx(0.5) and len(holds) == 3 and clock.syncs == 3  # long enough now

    def never(cycles):  # a GPU whose hold does not last: the round cannot be timed alone, and says so
        holds.append(cycles)
    with pytest.raises(RuntimeError, match="longer than the GPU was held"):
        baselines.flushed_rounds(call, clock.Event, clock.sync, lambda: None, calls=4, warmup=0, hold=never)()


def test_a_graphed_round_replays_calls_captured_once_with_no_python_between_them(monkeypatch):
    """A 3.9-microsecond matmul (2**-8 ms): a 10 ms round is 2,560 calls, captured once into a CUDA graph;
    a round is then one replay (a stand-in torch: capture counts the calls, replay runs them)."""
    clock, python_calls = _Clock(2.0**-8), []

    class Graph:
        captured, replays = 0, 0

        def replay(self):
            self.replays += 1
            clock.now += self.captured * clock.ms

    capturing = []

    def matmul():
        python_calls.append(1)
        if capturing:
            capturing[-1].captured += 1
        else:
            clock.call()

    @contextlib.contextmanager
    def graph(g):
        capturing.append(g)
        yield
        capturing.pop()

    stream = types.SimpleNamespace(wait_stream=lambda other: None)
    cuda = types.SimpleNamespace(Event=clock.Event, synchronize=clock.sync, CUDAGraph=Graph, graph=graph,
                                 Stream=lambda: stream, current_stream=lambda: stream,
                                 stream=lambda s: contextlib.nullcontext())
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    one_round = baselines.graph_rounds(matmul, warmup=2)
    made = len(python_calls)
    assert made == 2 + 1 + 1 + 2560  # warm-up, sizing, side-stream warm-up, capture
    assert [one_round() for _ in range(3)] == pytest.approx([2.0**-8] * 3)
    assert len(python_calls) == made  # the rounds ran no Python call of the matmul


@pytest.fixture
def session(results_dir, monkeypatch):
    """A live session on the CPU whose kernel rounds take 2, 4, 6, ... ms (a stand-in timer)."""
    write_record(results_dir, "01_vector_add", "recorded")
    nb = bench.Session("01_vector_add", quiet=True, device=tvm.cpu(0), target=tvm.target.Target("llvm"))
    kernel_ms = itertools.count(2.0, 2.0)
    monkeypatch.setattr(bench, "time_function", lambda *a, repeat, **kw: [next(kernel_ms) for _ in range(repeat)])
    return nb


def _add(nb, **kw):
    x = np.ones(N, np.float32)
    return nb.measure("add", ADD, [x, x, np.empty(N, np.float32)], 2 * x.astype(np.float64), flops=N, quiet=True, **kw)


def test_a_kernel_measured_against_a_baseline_is_timed_interleaved_with_it(session):
    blas_ms = itertools.count(1.0, 1.0)
    base = session.baseline("cuBLAS stand-in", lambda: next(blas_ms), repeat=3, flops=N)
    assert base.ms == 2.0 and base.source == "live" and session.results == [base]  # rounds 1, 2, 3 ms
    m = _add(session, baseline=base, repeat=4)
    # after the warm-up round (2 ms), kernel rounds 4, 6, 8, 10 ms beside baseline rounds 4, 5, 6, 7 ms
    assert m.versus == "cuBLAS stand-in" and m.ms == 7.0
    assert m.ratio == pytest.approx(np.median([4 / 4, 5 / 6, 6 / 8, 7 / 10]))
    assert m.baseline_ms == 5.5  # the baseline's median over those rounds, not its own 2.0 ms before
    assert m.of(base) == m.ratio != m.tflops / base.tflops
    # the per-round ratios 1, 5/6, 3/4, 7/10 spread from about 71% to 96%: behind in most rounds
    low, high = statistics.quantiles([4 / 4, 5 / 6, 6 / 8, 7 / 10], n=4)[::2]
    assert m.ratio_quartiles == pytest.approx([low, high]) and m.standing(base) == "behind"
    assert not m.l2_flushed  # on the CPU: nothing to flush
    text = helpers.table([m, base], baseline=base)  # the ratio beside 5.5 ms; the 2.0 ms no ratio used left out
    assert text.splitlines()[2].endswith(f"{m.ratio:.0%} [{low * 100:.0f}-{high:.0%}] of 5.5000 ms")
    assert "2.0000" not in text and text.splitlines()[3] == "(every row: live)"
    assert "quartiles" in text.splitlines()[4] and len(text.splitlines()) == 5


def test_a_table_wider_than_the_books_column_leaves_out_what_it_can_spare():
    base = bench.Measurement("cuBLAS float16 4096x4096x4096", 0.2, flops=1.4e11, bytes=1e8, date="2026-11-27",
                             source="recorded")
    def row(name, date):
        return bench.Measurement(name, 0.21, flops=1.4e11, bytes=1e8, rel_err=2e-4, versus=base.name, ratio=1.03,
                                 baseline_ms=0.22, ratio_quartiles=[1.02, 1.04], date=date, source="recorded")
    narrow = helpers.table([row("short", "2026-11-27")], baseline=base)
    assert "GB/s" in narrow and "rel. error" in narrow  # it fits: left as it is
    wide = helpers.table([row("wgmma + TMA, persistent, groups of 8 rows, fp16 C", "2026-11-27"),
                          row("first kernel", "2026-11-25")], baseline=base)
    assert max(len(line) for line in wide.splitlines()) <= 120, wide
    assert "GB/s" not in wide.splitlines()[0] and "2026-11-25" in wide and "103% [102-104%] of 0.2200 ms" in wide


def test_ahead_only_where_the_lower_quartile_of_the_rounds_is_above_one():
    base = bench.Measurement("cuBLAS", 1.0, flops=1e9)
    def kernel(quartiles):
        return bench.Measurement("kernel", 0.9, flops=1e9, versus="cuBLAS", ratio=1.1, ratio_quartiles=quartiles)
    assert kernel([1.02, 1.15]).standing(base) == "ahead of"
    assert kernel([0.98, 1.15]).standing(base) == "level with"
    assert kernel([0.90, 0.97]).standing(base) == "behind"
    assert kernel(None).standing(base) is None  # an older record: no spread, no verdict
    with pytest.raises(ValueError, match="lower quartile is above the upper"):
        kernel([1.2, 1.1])


def test_only_a_memory_bound_kernel_whose_data_fits_in_l2_is_timed_with_l2_flushed(session, monkeypatch):
    assert session.flush_bytes(1e6) == 0  # the CPU stand-in: no L2 to flush
    spec = helpers.env.datasheet("NVIDIA H100 80GB HBM3").spec()
    monkeypatch.setattr(session, "device", tvm.cuda(0))
    monkeypatch.setattr(session, "spec", spec)
    l2 = spec.l2_bytes
    assert session.flush_bytes(l2 / 2) == 2 * l2  # a softmax over 25 MB: flushed
    assert session.flush_bytes(8 * l2) == 0  # data well beyond L2: it cannot stay there
    assert session.flush_bytes(l2 / 2, flops=1e6 * l2) == 0  # compute-bound: L2 is part of the point
    assert session.flush_bytes(None) == 0


def test_without_a_live_baseline_the_kernel_is_timed_alone(session):
    recorded = bench.Measurement("cuBLAS from a record", 1.0, flops=N, source="recorded")
    m = _add(session, baseline=recorded, repeat=3)
    assert (m.versus, m.ratio, m.baseline_ms, m.ms) == (None, None, None, 4.0)
    assert m.of(recorded) == pytest.approx(m.tflops / recorded.tflops) == pytest.approx(0.25)


def test_a_baseline_needs_a_positive_number_of_rounds(session):
    with pytest.raises(ValueError, match="repeat must be a positive integer, got 0"):
        session.baseline("cuBLAS stand-in", lambda: 1.0, repeat=0)


def test_of_uses_the_interleaved_ratio_only_against_the_baseline_it_was_timed_with():
    blas = bench.Measurement("cuBLAS", 1.0, flops=1e9)
    other = bench.Measurement("cuBLAS, another run", 0.5, flops=1e9)
    m = bench.Measurement("kernel", 2.0, flops=1e9, versus="cuBLAS", ratio=0.6)
    assert m.of(blas) == 0.6
    assert m.of(other) == pytest.approx(0.25)  # no interleaved ratio: the TFLOP/s ratio
    assert m.of(None) is None and m.of(bench.Measurement("cuBLAS", None, source="missing")) is None
    assert bench.Measurement("kernel", None, source="missing").of(blas) is None
    assert bench.Measurement("no flops", 2.0).of(blas) is None


def test_the_interleaved_ratio_is_recorded_and_shown_without_a_gpu():
    m = bench.Measurement("kernel", 2.0, flops=1e9, versus="cuBLAS", ratio=0.873, gpu="Test GPU")
    back = bench.Measurement.from_record(m.to_record())
    assert (back.versus, back.ratio, back.source) == ("cuBLAS", 0.873, "recorded")
    blas = bench.Measurement.from_record(bench.Measurement("cuBLAS", 1.0, flops=1e9).to_record())
    row = helpers.table([back], baseline=blas).splitlines()[2]
    assert "87%" in row and "50%" not in row


@needs_gpu
def test_on_the_gpu_a_kernel_is_timed_interleaved_with_cublas(results_dir, vector_add, vector_add_args):
    nb = bench.Session("01_vector_add", quiet=True)
    blas = nb.cublas_matmul(256, 256, 256, quiet=True)
    if not blas.ok:
        pytest.skip("neither torch nor cupy: no cuBLAS here")
    args, expected = vector_add_args
    m = nb.measure("vector add", vector_add, args, expected, baseline=blas, repeat=5, quiet=True)
    assert m.versus == blas.name and m.ratio > 0 and m.of(blas) == m.ratio


def test_cublas_writing_c_in_another_type_is_its_own_baseline(session, monkeypatch, capsys):
    """A kernel writing fp32 C from fp16 A and B is compared with cuBLAS writing fp32 C too; where
    torch cannot do that, the baseline says why and is missing, and nothing else is timed."""
    asked = []

    def call(M, N, K, dtype, transpose_b, out_dtype):
        asked.append((M, N, K, dtype, transpose_b, out_dtype))
        raise RuntimeError("torch 2.5 cannot write float32 C from float16 A and B")

    monkeypatch.setattr(baselines, "cublas_call", call)
    m = session.cublas_matmul(64, 32, 16, "float16", out_dtype="float32")
    assert asked == [(64, 32, 16, "float16", False, "float32")]
    assert (m.name, m.source) == ("cuBLAS float16 64x32x16, float32 C", "missing")
    assert capsys.readouterr().out == ("cuBLAS float16 64x32x16, float32 C: torch 2.5 cannot write float32 C from "
                                       "float16 A and B, so there is no cuBLAS baseline\n")
    clock = _Clock(2.0)
    monkeypatch.setattr(baselines, "cublas_call", lambda *a: (clock.call, clock.Event, clock.sync))
    same = session.cublas_matmul(64, 32, 16, "float16", out_dtype="float16", repeat=3, quiet=True)
    fp32c = session.cublas_matmul(64, 32, 16, "float16", out_dtype="float32", repeat=3, quiet=True)
    assert same.name == "cuBLAS float16 64x32x16" and same.ms == pytest.approx(2.0)
    assert fp32c.params == {"transpose_b": False, "out_dtype": "float32"}
    assert (same.bytes, fp32c.bytes) == ((64 * 16 + 16 * 32 + 64 * 32) * 2, (64 * 16 + 16 * 32) * 2 + 64 * 32 * 4)


def test_two_recorded_runs_of_notebook_07_agree():
    """The point of interleaving: notebook 07 (then holding 08's kernels too) recorded on the H100
    twice in a row from one commit (both runs' JSON kept under logs/) gives every 4096³ kernel's
    "% of cuBLAS" within 2 points of the other run's, though cuBLAS's own time moves by several
    percent between runs. (The size sweep's other sizes are left out: the smallest run for
    microseconds.)"""
    folder = records.RESULTS_DIR / "nvidia-h100-80gb-hbm3" / "logs"
    first, second = _ratios_at_4096(folder / "07_hopper_wgmma_tma.first-run.json",
                                    folder / "07_hopper_wgmma_tma.second-run.json")
    assert len(first) >= 10 and first.keys() == second.keys()
    spread = sorted(abs(first[k] - second[k]) * 100 for k in first)
    assert spread[-1] <= 2.0, spread


def _ratios_at_4096(*paths):
    return [{k: v["ratio"] for k, v in records.load(p)["measurements"].items()
             if v.get("ratio") and v["shape"][0] == [4096, 4096]} for p in paths]


def test_cublas_replays_a_cuda_graph_only_when_asked_and_only_through_torch(session, monkeypatch):
    clock, graphed = _Clock(2.0), []

    class TorchEvent:  # stands in for torch.cuda.Event, which is how a torch call is told apart
        __module__ = "torch.cuda.streams"

    monkeypatch.setattr(baselines, "graph_rounds", lambda call: graphed.append(call) or (lambda: 1.0))
    monkeypatch.setattr(baselines, "cublas_call", lambda *a: (clock.call, TorchEvent, clock.sync))
    m = session.cublas_matmul(64, 32, 16, "float16", out_dtype="float32", graph=True, repeat=3, quiet=True)
    assert graphed == [clock.call] and m.ms == 1.0 and m.params["graph"] is True
    monkeypatch.setattr(baselines, "cublas_call", lambda *a: (clock.call, clock.Event, clock.sync))  # cupy's
    cupy = session.cublas_matmul(64, 32, 16, "float16", graph=True, repeat=3, quiet=True)
    assert len(graphed) == 1 and cupy.ms == pytest.approx(2.0) and "graph" not in cupy.params


def test_a_tvm_call_launches_on_the_stream_torch_has_when_it_runs(monkeypatch):
    """`on_torch_stream` must read torch's current stream at each call, not once: a CUDA graph
    captures on a side stream of its own, which is current only while it captures."""
    import tvm_ffi

    current, seen = types.SimpleNamespace(cuda_stream=0), []
    cuda = types.SimpleNamespace(current_stream=lambda: current)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))

    @contextlib.contextmanager
    def use_raw_stream(dev, stream):
        seen.append(("enter", dev, stream))
        yield
        seen.append(("exit", dev, stream))

    monkeypatch.setattr(tvm_ffi, "use_raw_stream", use_raw_stream)
    call = baselines.on_torch_stream(lambda *args: seen.append(("launch", args)), "gpu0", ["a", "b"])
    call()
    current.cuda_stream = 77  # as inside torch.cuda.graph(...)
    call()
    assert seen == [("enter", "gpu0", 0), ("launch", ("a", "b")), ("exit", "gpu0", 0),
                    ("enter", "gpu0", 77), ("launch", ("a", "b")), ("exit", "gpu0", 77)]


def test_a_torch_operation_is_a_baseline_like_cublas(session, monkeypatch, capsys):
    """`torch_op` (notebook 09's softmax and layer norm) times torch's kernel from device events,
    keeps it for interleaving, and counts the bytes it was given; without torch it says so."""
    handed = []
    clock = _Clock(0.5)

    def torch_call(fn, arrays):
        handed.append((fn, [a.shape for a in arrays]))
        return clock.call, clock.Event, clock.sync

    monkeypatch.setattr(baselines, "torch_call", torch_call)
    x = np.ones((4, 64), np.float16)
    op = lambda torch, x: torch.softmax(x, dim=-1)  # noqa: E731
    base = session.torch_op("torch.softmax stand-in", op, [x], bytes=2.0 * x.nbytes, repeat=3, quiet=True)
    assert handed == [(op, [(4, 64)])]
    assert (base.source, base.ms, base.bytes, base.shape, base.dtype) == ("live", pytest.approx(0.5), 1024.0, [[4, 64]],
                                                                          "float16")
    assert "torch.softmax stand-in" in session._rounds  # a kernel can be timed interleaved with it
    monkeypatch.setattr(baselines, "torch_call", lambda fn, arrays: None)
    missing = session.torch_op("torch layer_norm", op, [x])
    assert missing.source == "missing"
    assert capsys.readouterr().out == "torch layer_norm: torch is not installed, so there is no torch baseline\n"



def test_a_torch_operation_torch_cannot_run_here_is_a_missing_baseline(session, monkeypatch, capsys):
    """Notebook 10 asks torch for each attention backend; one this GPU lacks raises a RuntimeError
    when called. That is one line and a missing baseline, not a failed notebook; the work (`flops`)
    of one that runs is kept."""
    clock = _Clock(0.25)
    monkeypatch.setattr(baselines, "torch_call", lambda fn, arrays: (clock.call, clock.Event, clock.sync))
    x = np.ones((2, 8), np.float16)
    ran = session.torch_op("torch sdpa, flash", lambda torch, x: x, [x], flops=1e9, repeat=2, quiet=True)
    assert (ran.source, ran.flops) == ("live", 1e9)

    def no_kernel():
        raise RuntimeError("No available kernel. Aborting execution.\nmore detail")

    monkeypatch.setattr(baselines, "torch_call", lambda fn, arrays: (no_kernel, clock.Event, clock.sync))
    missing = session.torch_op("torch sdpa, cuDNN", lambda torch, x: x, [x], flops=1e9)
    assert missing.source == "missing" and "torch sdpa, cuDNN" not in session._rounds
    assert capsys.readouterr().out == ("torch sdpa, cuDNN: torch cannot run it on this GPU (No available kernel. "
                                       "Aborting execution.)\n")

def test_torch_call_hands_the_module_and_gpu_copies_to_the_operation(monkeypatch):
    made = []
    tensor = lambda a: types.SimpleNamespace(cuda=lambda: made.append(a.shape) or f"cuda {a.shape}")  # noqa: E731
    torch = types.SimpleNamespace(from_numpy=tensor, cuda=types.SimpleNamespace(Event="event", synchronize="sync"))
    monkeypatch.setitem(sys.modules, "torch", torch)
    call, Event, sync = baselines.torch_call(lambda t, x, w: (t, x, w), [np.ones(3), np.ones((2, 2))])
    assert (Event, sync, made) == ("event", "sync", [(3,), (2, 2)])
    assert call() == (torch, "cuda (3,)", "cuda (2, 2)")
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch fails
    assert baselines.torch_call(lambda t, x: x, [np.ones(3)]) is None


def test_without_a_gpu_a_torch_baseline_is_the_record(results_dir):
    if helpers.gpu_available():
        pytest.skip("tests the no-GPU path")
    write_record(results_dir, "09_reductions", "torch.softmax fp16 4096x4096")
    nb = bench.Session("09_reductions", quiet=True)
    m = nb.torch_op("torch.softmax fp16 4096x4096", lambda torch, x: x, [np.ones(4, np.float16)], quiet=True)
    assert m.source == "recorded" and nb.results == [m]
    assert nb.torch_op("torch layer_norm", lambda torch, x: x, [np.ones(4)], quiet=True).source == "missing"


@pytest.mark.parametrize("torch_installed", [True, False])
def test_a_flushed_kernel_is_timed_as_its_torch_baseline_is_where_torch_is_installed(session, monkeypatch,
                                                                                     torch_installed):
    """Data that fits in L2: with torch, the kernel's rounds are `baselines.torch_flushed_rounds` of
    the built kernel (as its torch baseline's are), not TVM's time_evaluator, whose flush syncs and
    times the launch; without torch, time_evaluator's flushed calls, 10 a round."""
    monkeypatch.setattr(bench.Session, "flush_bytes", lambda self, bytes, flops=None: 1 << 20)
    made, evaluator = [], []

    def flushed(ex, dev, dev_args, flush):
        made.append((hasattr(ex.mod, "time_evaluator"), len(dev_args), flush))
        held = itertools.count(1.0, 1.0)
        return (lambda: next(held)) if torch_installed else None

    monkeypatch.setattr(bench, "_flushed_rounds", flushed)
    monkeypatch.setattr(bench, "time_function", lambda *a, repeat, **kw: evaluator.append((repeat, kw)) or [3.0] * repeat)
    base = session.baseline("torch stand-in", lambda: 2.0, repeat=2, bytes=N * 4.0)
    m = _add(session, baseline=base, repeat=4, bytes=N * 12.0)
    assert made == [(True, 3, 1 << 20)] and m.l2_flushed
    if torch_installed:
        assert evaluator == [] and m.ms == 2.5 and m.ratio == pytest.approx(np.median([2 / 1, 2 / 2, 2 / 3, 2 / 4]))
    else:
        assert evaluator == [(1, {})] + [(10, {"warmup": 0, "flush_bytes": 1 << 20})] * 4 and m.ms == 3.0
