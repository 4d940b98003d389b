"""The check before timing, run for real on the CPU: `Session.measure`'s live path.

Without a GPU a notebook's `measure` only shows recorded numbers, so its gate (poison the output
with NaN, run once, compare with the float64 reference, raise `WrongResult` before any timing)
would run only on a GPU. Here the session is given the CPU and TVM's LLVM target, so the same
code builds, runs and checks small kernels that are wrong in the ways real kernels are wrong.
"""

import dataclasses

import numpy as np
import pytest
import tvm
from tvm import te
from tvm.script import tirx as T

import helpers
from helpers import bench

from conftest import write_record

N = 64
TOL = 1e-5


def _elementwise(value):
    """C[i] = value(A, B, i) for i < N, unscheduled: the LLVM target runs it on the CPU."""
    a = te.placeholder((N,), "float32", name="A")
    b = te.placeholder((N,), "float32", name="B")
    c = te.compute((N,), lambda i: value(a, b, i), name="C")
    return te.create_prim_func([a, b, c])


ADD = _elementwise(lambda a, b, i: a[i] + b[i])
WRITES_NAN = _elementwise(lambda a, b, i: tvm.tirx.if_then_else(i == 5, tvm.tirx.const(float("nan"), "float32"), a[i] + b[i]))


@T.prim_func
def leaves_last_unwritten(A: T.Buffer((N,), "float32"), B: T.Buffer((N,), "float32"), C: T.Buffer((N,), "float32")):
    for i in range(N - 1):  # the classic off-by-one: the last element is never written
        C[i] = A[i] + B[i]


@pytest.fixture
def session(results_dir, monkeypatch):
    """A live session on the CPU, labelled with a recorded test GPU; its timer is a spy."""
    write_record(results_dir, "01_vector_add", "recorded")
    nb = bench.Session("01_vector_add", quiet=True, device=tvm.cpu(0), target=tvm.target.Target("llvm"))
    calls = []
    real = bench.time_function

    def spy(*args, **kw):
        calls.append(args)
        nb.timed_repeats.append(kw.get("repeat"))
        return real(*args, **kw)

    monkeypatch.setattr(bench, "time_function", spy)
    nb.timed, nb.timed_repeats = calls, []
    return nb


@pytest.fixture
def inputs():
    rng = np.random.default_rng(1)
    a = rng.random(N, dtype=np.float32) + 0.5
    b = rng.random(N, dtype=np.float32) + 0.5
    exact = a.astype(np.float64) + b
    return a, b, exact


def test_a_right_kernel_is_checked_then_timed(session, inputs):
    a, b, exact = inputs
    m = session.measure("add", ADD, [a, b, np.empty(N, np.float32)], exact, flops=N, bytes=12 * N, repeat=3,
                        params={"threads": 1})
    assert m.source == "live" and m.gpu == "Test GPU" and m.rel_err < 1e-7
    assert len(session.timed) == 1 and m.ms > 0 and session.timed_repeats == [3]
    assert (m.name, m.flops, m.bytes, m.shape, m.dtype, m.params) == ("add", N, 12 * N, [[N]] * 3, "float32", {"threads": 1})
    assert session.results == [m]
    assert session.measure("once", ADD, [a, b, np.empty(N, np.float32)], exact, repeat=1, quiet=True).ok
    assert m.tflops == pytest.approx(N / (m.ms * 1e-3) / 1e12)


def _refused(session, kernel, args, expected, match, tol=TOL):
    with pytest.raises(helpers.WrongResult, match=match):
        session.measure("wrong", kernel, args, expected, tol=tol, repeat=3)
    assert session.timed == [], "a wrong kernel must not be timed"
    assert session.results == []


def test_an_unwritten_element_is_caught_even_if_the_output_held_the_answer(session, inputs):
    """The output array passed in already holds the right answer: only the NaN poisoning before
    the checked run makes the element the kernel forgot to write show up."""
    a, b, exact = inputs
    leftover = exact.astype(np.float32)
    _refused(session, leaves_last_unwritten, [a, b, leftover], exact, r"wrong: relative error nan exceeds the tolerance 1e-05")


def test_nan_in_the_output_is_caught(session, inputs):
    a, b, exact = inputs
    _refused(session, WRITES_NAN, [a, b, np.empty(N, np.float32)], exact, r"relative error nan exceeds")


def test_an_error_just_outside_the_tolerance_is_caught(session, inputs):
    a, b, exact = inputs
    off = 1.05 * TOL  # the kernel's result against a reference 1.05e-5 away: rel. error ~1.05e-5
    _refused(session, ADD, [a, b, np.empty(N, np.float32)], exact * (1 + off),
             r"relative error 1\.0[45]\de-05 exceeds the tolerance 1e-05: the kernel is wrong, so it is not timed")


def test_an_error_just_inside_the_tolerance_passes(session, inputs):
    a, b, exact = inputs
    m = session.measure("add", ADD, [a, b, np.empty(N, np.float32)], exact * (1 + 0.95 * TOL), repeat=3)
    assert 0.9 * TOL < m.rel_err < TOL and len(session.timed) == 1


def test_the_reference_may_be_a_function(session, inputs):
    a, b, exact = inputs
    calls = []

    def reference():
        calls.append(1)
        return exact

    m = session.measure("add", ADD, [a, b, np.empty(N, np.float32)], reference, repeat=3)
    assert calls == [1] and m.rel_err < 1e-7 and m.rel_err <= TOL
    timed_before = session.timed[:]
    with pytest.raises(helpers.WrongResult, match="relative error 5.000e-01 exceeds"):
        session.measure("wrong", ADD, [a, b, np.empty(N, np.float32)], lambda: 2 * exact, repeat=3)
    assert session.timed == timed_before, "a wrong kernel must not be timed"


def test_without_a_reference_nothing_is_checked_but_the_time_is_kept(session, inputs):
    a, b, _ = inputs
    m = session.measure("add", WRITES_NAN, [a, b, np.empty(N, np.float32)], None, repeat=3)
    assert m.rel_err is None and len(session.timed) == 1


def test_a_function_reference_is_not_computed_without_a_gpu(results_dir, inputs, vector_add):
    """Off the GPU the recorded result is shown and the costly float64 reference never runs."""
    if helpers.gpu_available():
        pytest.skip("tests the no-GPU path")
    from conftest import N as VN

    nb = bench.Session("01_vector_add", quiet=True)
    args = [np.zeros(VN, np.float32)] * 3
    m = nb.measure("vector add", vector_add, args, lambda: pytest.fail("the reference was computed"))
    assert m.source == "missing"


# ---------------------------------------------------------------- the rest of a live session, on the CPU


def test_tolerance_zero_accepts_an_exact_result(session, inputs):
    a, b, _ = inputs
    m = session.measure("add", ADD, [a, b, np.empty(N, np.float32)], (a + b).astype(np.float64), tol=0, repeat=1)
    assert m.rel_err == 0.0


def test_twenty_timed_rounds_by_default(session, inputs, monkeypatch):
    asked = []
    monkeypatch.setattr(bench, "time_function", lambda *args, repeat: asked.append(repeat) or [1.0])  # not timed for real
    a, b, exact = inputs
    assert session.measure("add", ADD, [a, b, np.empty(N, np.float32)], exact).ms == 1.0
    assert asked == [20]


def test_run_returns_the_output(monkeypatch, inputs):
    """`run` builds, checks the arguments and runs once: the output comes back as NumPy (any
    argument may be the output: `out`)."""
    a, b, _ = inputs
    monkeypatch.setattr(helpers.env, "device", lambda: tvm.cpu(0))
    llvm = tvm.target.Target("llvm")
    np.testing.assert_array_equal(bench.run(ADD, [a, b, np.empty(N, np.float32)], llvm), a + b)
    np.testing.assert_array_equal(bench.run(ADD, [a, b, np.empty(N, np.float32)], llvm, out=2), a + b)
    with pytest.raises(ValueError, match="the kernel takes 3 arrays"):
        bench.run(ADD, [a, b], llvm)


def test_only_the_output_is_poisoned():
    floats, ints = np.ones(4, np.float32), np.arange(4, dtype=np.int32)
    kept = tvm.runtime.tensor(np.full(4, 3.0, np.float32), tvm.cpu(0))
    on_device = bench._to_device([kept, floats, ints], tvm.cpu(0), poison_index=2)
    assert on_device[0] is kept  # already on the device: used as it is
    np.testing.assert_array_equal(on_device[1].numpy(), floats)
    np.testing.assert_array_equal(on_device[2].numpy(), [-7] * 4)  # integers have no NaN: -7 stands out
    assert np.isnan(bench._to_device([floats], tvm.cpu(0), poison_index=0)[0].numpy()).all()
    np.testing.assert_array_equal(bench._to_device([ints], tvm.cpu(0))[0].numpy(), ints)  # nothing poisoned


def test_arrays_already_on_the_device_are_checked_too(monkeypatch, inputs):
    """Here the CPU plays the GPU: a tvm.runtime.Tensor is checked for shape and dtype like a NumPy array."""
    monkeypatch.setattr(tvm, "cuda", tvm.cpu)
    a, b, _ = inputs
    short = tvm.runtime.tensor(np.zeros(N - 1, np.float32), tvm.cpu(0))
    with pytest.raises(ValueError, match=rf"array B has shape \({N - 1},\), but the kernel's buffer B is \({N},\)"):
        bench.check_args(ADD, [a, short, np.empty(N, np.float32)])
    doubles = tvm.runtime.tensor(np.zeros(N), tvm.cpu(0))
    with pytest.raises(ValueError, match="array C has dtype float64, but the kernel's buffer C is float32"):
        bench.check_args(ADD, [a, b, doubles])


def test_a_built_kernel_names_its_arguments_by_position(inputs):
    a, b, _ = inputs
    built = bench.kernels.build(ADD, tvm.target.Target("llvm"))
    with pytest.raises(TypeError, match="array argument 1 is a list"):
        bench.check_args(built, [a, [0.0]])


def test_a_zero_reference_gives_the_absolute_error_and_float16_does_not_overflow():
    assert helpers.relative_error(np.full(4, 0.5), np.zeros(4)) == pytest.approx(1.0)
    # fp16 results near the top of fp16's range: squared in fp16 they would overflow to inf
    assert helpers.relative_error(np.float16([60000, 1]), np.float16([59968, 1])) == pytest.approx(32 / 59968, rel=1e-3)


def test_live_numbers_are_labelled_and_recorded_only_when_asked(session, inputs, results_dir, monkeypatch):
    a, b, exact = inputs
    m = session.record("torch add", 0.5, flops=N, on_cpu=True)
    assert (m.name, m.ms, m.source, m.gpu, m.date, m.tvm, m.notebook, m.on_cpu) == \
        ("torch add", 0.5, "live", "Test GPU", helpers.env.today(), tvm.__version__, "01_vector_add", True)
    assert session.results == [m] and session.recorded_or_live("torch add") is m
    assert session.recorded_or_live("recorded").source == "recorded"  # not measured here: the record
    assert session.recorded_or_live("never") is None
    session.mode = dataclasses.replace(session.mode, record=True, record_command="gpu/record.sh")  # what the session carries
    session.measure("add", ADD, [a, b, np.empty(N, np.float32)], exact, repeat=1, quiet=True)
    data = helpers.records.load(results_dir / "test-gpu" / "01_vector_add.json")
    entry = data["measurements"]["add"]
    assert entry["command"] == "gpu/record.sh" and entry["notebook"] == "01_vector_add" and "source" not in entry
    assert data["device"] == session.spec.to_dict() and set(data["measurements"]) == {"recorded", "add"}


def test_cublas_baseline_in_a_live_session(session, monkeypatch, capsys):
    asked = []
    monkeypatch.setattr(bench.baselines, "cublas_call", lambda *a: asked.append(a) or ("call", "Event", "sync"))
    rounds = []
    monkeypatch.setattr(bench.baselines, "event_rounds", lambda call, Event, sync: lambda: rounds.append(1) or 0.5)
    m = session.cublas_matmul(64, 32, 16, "float16", transpose_b=True, repeat=4)  # rounds of 0.5 ms
    assert asked == [(64, 32, 16, "float16", True, None)] and len(rounds) == 4
    assert (m.name, m.ms, m.flops, m.bytes, m.shape, m.dtype, m.params) == (
        "cuBLAS float16 64x32x16", 0.5, 2.0 * 64 * 32 * 16, 2.0 * (64 * 16 + 16 * 32 + 64 * 32), [64, 32, 16], "float16",
        {"transpose_b": True})
    assert m.source == "live" and session.results == [m]
    assert capsys.readouterr().out == f"{m}\n"
    assert session.cublas_matmul(8, 8, 8, name="mine", quiet=True).name == "mine" and capsys.readouterr().out == ""
    assert asked[-1] == (8, 8, 8, "float32", False, None) and len(rounds) == 4 + 20  # 20 rounds by default
    assert session.cublas_matmul(8, 8, 8, repeat=1, quiet=True).ms == 0.5 and len(rounds) == 25
    monkeypatch.setattr(bench.baselines, "cublas_call", lambda *a: None)
    none = session.cublas_matmul(8, 8, 8)
    assert (none.ok, none.name, none.gpu, none.notebook) == (False, "cuBLAS float32 8x8x8", "Test GPU", "01_vector_add")
    assert capsys.readouterr().out == "cuBLAS float32 8x8x8: neither torch nor cupy is installed, so there is no cuBLAS baseline\n"


def test_a_kernel_timed_against_a_baseline_is_run_for_real(session, inputs, monkeypatch):
    """Interleaved with a baseline, the kernel itself is timed: one warm-up round, then one round
    (no further warm-up) beside each of the baseline's."""
    seen, spy = [], bench.time_function
    monkeypatch.setattr(bench, "time_function", lambda f, dev, args, **kw: seen.append((f, dev, len(args), kw)) or
                        spy(f, dev, args, **kw))
    base = session.baseline("stand-in", lambda: 1.0, repeat=2, flops=N)
    a, b, exact = inputs
    m = session.measure("add", ADD, [a, b, np.empty(N, np.float32)], exact, flops=N, baseline=base, repeat=3, quiet=True)
    assert m.versus == "stand-in" and m.ratio > 0 and m.of(base) == m.ratio
    assert [kw for *_, kw in seen] == [{"repeat": 1}] + [{"repeat": 1, "warmup": 0}] * 3
    assert all(hasattr(f, "time_evaluator") and dev == tvm.cpu(0) and n == 3 for f, dev, n, _ in seen)
    counted = []
    assert session.baseline("by default", lambda: counted.append(1) or 2.0).ms == 2.0 and len(counted) == 20
