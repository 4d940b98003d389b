import dataclasses
import json
import sys
import types

import numpy as np
import pytest
import tvm

import helpers
from helpers import baselines, bench, mode, records

from conftest import N, needs_gpu, write_record


def test_relative_error():
    assert helpers.relative_error(np.ones(4), np.ones(4)) == 0
    assert helpers.relative_error(np.array([1.0, 1.0]), np.array([1.0, 2.0])) == pytest.approx(1 / 5 ** 0.5)
    assert np.isnan(helpers.relative_error(np.array([np.nan]), np.array([1.0])))
    with pytest.raises(ValueError, match=r"output shape \(3,\) differs from the reference's \(4,\)"):
        helpers.relative_error(np.ones(3), np.ones(4))


def test_wrong_shape_is_named(vector_add, vector_add_args):
    args, _ = vector_add_args
    args[1] = np.zeros(N + 1, np.float32)
    with pytest.raises(ValueError, match=rf"array B has shape \({N + 1},\), but the kernel's buffer B is \({N},\)"):
        helpers.check_args(vector_add, args)



def test_a_symbolic_size_takes_any_length_and_a_static_one_is_still_checked():
    """TVM's own kernels (notebook 10 times its attention prefill) leave the batch and the sequence
    symbolic: any size fits there, while a static size is checked as before, and named."""
    from tvm.script import tirx as T

    @T.prim_func(s_tir=True)
    def rows(a: T.handle, b: T.handle):
        n = T.int32()
        A = T.match_buffer(a, (n, 8), "float32")
        B = T.match_buffer(b, (n,), "float32")
        for i in range(n):
            B[i] = A[i, 0]

    helpers.check_args(rows, [np.zeros((5, 8), np.float32), np.zeros(5, np.float32)])
    helpers.check_args(rows, [np.zeros((7, 8), np.float32), np.zeros(7, np.float32)])
    with pytest.raises(ValueError, match=r"array A has shape \(5, 9\), but the kernel's buffer A is \(n, 8\)"):
        helpers.check_args(rows, [np.zeros((5, 9), np.float32), np.zeros(5, np.float32)])
    with pytest.raises(ValueError, match=r"array B has shape \(5, 1\), but the kernel's buffer B is \(n,\)"):
        helpers.check_args(rows, [np.zeros((5, 8), np.float32), np.zeros((5, 1), np.float32)])

def test_wrong_dtype_is_named(vector_add, vector_add_args):
    args, _ = vector_add_args
    args[0] = args[0].astype(np.float64)
    with pytest.raises(ValueError, match="array A has dtype float64, but the kernel's buffer A is float32"):
        helpers.check_args(vector_add, args)


def test_wrong_count_is_named(vector_add, vector_add_args):
    args, _ = vector_add_args
    with pytest.raises(ValueError, match=r"the kernel takes 3 arrays \(A, B, C\), got 2"):
        helpers.check_args(vector_add, args[:2])


def test_array_on_the_cpu_is_refused(vector_add, vector_add_args):
    args, _ = vector_add_args
    args[0] = tvm.runtime.tensor(args[0], tvm.cpu(0))
    with pytest.raises(ValueError, match=r"array A is on cpu.*not the GPU: make it with tvm\.runtime\.tensor\(x, tvm\.cuda\(0\)\)$"):
        helpers.check_args(vector_add, args)


def test_not_an_array_is_refused(vector_add, vector_add_args):
    args, _ = vector_add_args
    args[2] = [0.0] * N
    with pytest.raises(TypeError, match="array C is a list"):
        helpers.check_args(vector_add, args)


@pytest.mark.parametrize("repeat", [0, -3, 2.5])
def test_non_positive_repeat_is_refused(repeat, results_dir, vector_add, vector_add_args):
    nb = bench.Session("01_vector_add", quiet=True)
    args, expected = vector_add_args
    with pytest.raises(ValueError, match="repeat must be a positive integer"):
        nb.measure("vector add", vector_add, args, expected, repeat=repeat)
    with pytest.raises(ValueError, match="repeat must be a positive integer"):
        helpers.time_function(None, None, [], repeat=repeat)


@pytest.mark.skipif(helpers.gpu_available(), reason="tests the no-GPU path")
def test_without_gpu_the_recorded_result_is_shown_as_recorded(results_dir, vector_add, vector_add_args, capsys):
    write_record(results_dir, "01_vector_add", "vector add")
    nb = bench.Session("01_vector_add")
    banner = capsys.readouterr().out
    assert "no GPU" in banner and "recorded on Test GPU on 2026-11-22 (TVM 0.27.0.post1)" in banner
    assert nb.spec.name == "Test GPU"
    args, expected = vector_add_args
    m = nb.measure("vector add", vector_add, args, expected)
    assert m.source == "recorded" and m.ms == 0.25
    assert m.gbps == pytest.approx(3 * 4 * N / 0.25e-3 / 1e9)
    out = capsys.readouterr().out
    assert "recorded on Test GPU, 2026-11-22, TVM 0.27.0.post1" in out and "live" not in out


@pytest.mark.skipif(helpers.gpu_available(), reason="tests the no-GPU path")
def test_without_gpu_a_missing_record_is_said_plainly(results_dir, vector_add, vector_add_args, capsys):
    nb = bench.Session("01_vector_add")
    args, expected = vector_add_args
    m = nb.measure("never recorded", vector_add, args, expected)
    assert not m.ok and m.ms is None
    assert "never recorded: no recorded result" in capsys.readouterr().out
    assert "no record" in helpers.table([m])


def test_table_reads_as_plain_text():
    a = helpers.Measurement("naive", ms=10.0, flops=2e12, source="recorded", date="2026-11-22", rel_err=1e-7)
    base = helpers.Measurement("cuBLAS", ms=1.0, flops=2e12, source="recorded", date="2026-11-22")
    text = helpers.table([a, base], baseline=base)
    lines = text.splitlines()
    assert lines[0].split()[:3] == ["kernel", "ms", "TFLOP/s"]
    assert "10%" in lines[2] and "100%" in lines[3] and "1.0e-07" in lines[2]


def test_a_cpu_baseline_does_not_claim_the_gpu():
    gpu = dict(gpu="NVIDIA H100 80GB HBM3", date="2026-11-22", tvm="0.27.0.post1")
    cpu = helpers.Measurement("NumPy", ms=100.0, on_cpu=True, **gpu)
    kernel = helpers.Measurement("kernel", ms=1.0, **gpu)
    assert str(cpu).endswith("[live on the CPU of the NVIDIA H100 80GB HBM3 machine]")
    assert str(kernel).endswith("[live on NVIDIA H100 80GB HBM3]")
    recorded = helpers.Measurement.from_record(cpu.to_record())
    assert recorded.label() == "recorded on the CPU of the NVIDIA H100 80GB HBM3 machine, 2026-11-22, TVM 0.27.0.post1"


@needs_gpu
def test_live_measure_checks_then_times(results_dir, vector_add, vector_add_args):
    nb = bench.Session("01_vector_add", quiet=True)
    args, expected = vector_add_args
    m = nb.measure("vector add", vector_add, args, expected, bytes=3.0 * 4 * N, repeat=5)
    assert m.source == "live" and m.ms > 0 and m.rel_err < 1e-6 and m.gbps > 0
    assert not list(results_dir.rglob("*.json")), "a student's run must not write records"


@needs_gpu
def test_live_measure_refuses_to_time_a_wrong_kernel(results_dir, vector_add, vector_add_args):
    nb = bench.Session("01_vector_add", quiet=True)
    args, expected = vector_add_args
    with pytest.raises(helpers.WrongResult, match="wrong add: relative error .* exceeds"):
        nb.measure("wrong add", vector_add, args, expected * 2)


@needs_gpu
def test_recording_only_when_asked(results_dir, vector_add, vector_add_args, monkeypatch):
    monkeypatch.setenv("COURSE_RECORD", "1")
    mode.read()  # as helpers.start does
    nb = bench.Session("01_vector_add", quiet=True)
    args, expected = vector_add_args
    nb.measure("vector add", vector_add, args, expected, bytes=3.0 * 4 * N, repeat=3)
    (path,) = results_dir.rglob("01_vector_add.json")
    data = records.load(path)
    assert data["gpu"] == nb.spec.name and data["device"]["sm_count"] == nb.spec.sm_count
    entry = data["measurements"]["vector add"]
    assert entry["tvm"] == tvm.__version__ and entry["shape"] == [[N], [N], [N]] and entry["dtype"] == "float32"


@needs_gpu
def test_cublas_baseline_when_torch_or_cupy_exists(results_dir):
    pytest.importorskip("torch")
    nb = bench.Session("03_matmul_local_blocking", quiet=True)
    m = nb.cublas_matmul(512, 512, 512, "float32", repeat=3)
    assert m.ok and m.tflops > 0.1


def test_recorded_measurements_of_a_notebook(results_dir):
    assert helpers.recorded_measurements("01_vector_add") == []
    write_record(results_dir, "01_vector_add", "vector add")
    (m,) = helpers.recorded_measurements("01_vector_add", gpu="some-other-gpu")  # falls back to the recorded GPU
    assert m.name == "vector add" and m.source == "recorded"


# ---------------------------------------------------------------- timing, with stand-ins for the GPU


def test_cupy_events_are_read_through_cupy(monkeypatch):
    cupy = types.SimpleNamespace(cuda=types.SimpleNamespace(get_elapsed_time=lambda s, e: e.t - s.t))
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    assert baselines._elapsed(types.SimpleNamespace(t=1.0), types.SimpleNamespace(t=3.5)) == 2.5


def _fake_torch(calls):
    """Enough of torch for cublas_time: tensors are (shape, dtype, device) tuples."""
    def tensor(*shape, device, dtype):
        return types.SimpleNamespace(shape=shape, dtype=dtype, device=device, transposed=False,
                                     t=lambda: types.SimpleNamespace(shape=shape[::-1], dtype=dtype, device=device, transposed=True))

    matmul = types.SimpleNamespace(allow_tf32=True, allow_fp16_reduced_precision_reduction=True)
    return types.SimpleNamespace(
        float32="torch.float32", float16="torch.float16", randn=tensor, empty=tensor,
        backends=types.SimpleNamespace(cuda=types.SimpleNamespace(matmul=matmul)),
        matmul=lambda a, b, out: calls.append((a, b, out)),
        cuda=types.SimpleNamespace(Event="torch event", synchronize="torch sync"))


def test_cublas_through_torch_times_one_matmul_without_tf32(monkeypatch):
    calls, timed = [], []
    torch = _fake_torch(calls)
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setattr(baselines, "event_median_ms", lambda call, Event, sync, repeat, warmup:
                        timed.append((call, Event, sync, repeat, warmup)) or 1.25)
    assert baselines.cublas_time(64, 32, 16, "float16", repeat=7, warmup=4) == 1.25
    call, Event, sync, repeat, warmup = timed[0]
    assert (Event, sync, repeat, warmup) == ("torch event", "torch sync", 7, 4)
    assert torch.backends.cuda.matmul.allow_tf32 is False
    assert torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction is False
    call()
    (a, b, c), = calls
    assert (a.shape, b.shape, c.shape) == ((64, 16), (16, 32), (64, 32))
    assert {a.dtype, b.dtype, c.dtype} == {"torch.float16"} and {a.device, b.device, c.device} == {"cuda"}
    assert not b.transposed
    baselines.cublas_time(64, 32, 16, transpose_b=True)
    timed[1][0]()
    b = calls[1][1]
    assert (b.transposed, b.shape, b.dtype, b.device) == (True, (16, 32), "torch.float32", "cuda")
    assert timed[1][3:] == (20, 3)  # by default 20 rounds after 3 warm-up calls


def test_cublas_through_cupy_when_torch_is_missing(monkeypatch):
    calls, timed = [], []

    class Array:
        def __init__(self, shape, dtype="float64", transposed=False):
            self.shape, self.dtype, self.transposed = shape, dtype, transposed

        def astype(self, dtype):
            return Array(self.shape, dtype, self.transposed)

        @property
        def T(self):
            return Array(self.shape[::-1], self.dtype, True)

    cupy = types.SimpleNamespace(
        random=types.SimpleNamespace(randn=lambda *shape: Array(shape)), empty=lambda shape, dtype: Array(shape, dtype),
        matmul=lambda a, b, out: calls.append((a, b, out)),
        cuda=types.SimpleNamespace(Event=lambda: "cupy event", Device=lambda: types.SimpleNamespace(synchronize="cupy sync")))
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch fails
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setattr(baselines, "event_median_ms", lambda call, Event, sync, repeat, warmup:
                        timed.append((call, Event, sync, repeat, warmup)) or 2.5)
    assert baselines.cublas_time(64, 32, 16, "float32", transpose_b=True, repeat=5) == 2.5
    call, Event, sync, repeat, warmup = timed[0]
    assert (Event(enable_timing=True), sync, repeat, warmup) == ("cupy event", "cupy sync", 5, 3)
    call()
    (a, b, c), = calls
    assert (a.shape, b.shape, c.shape) == ((64, 16), (16, 32), (64, 32)) and {a.dtype, b.dtype, c.dtype} == {"float32"}
    assert b.transposed
    baselines.cublas_time(8, 4, 2, "float16", repeat=1)
    timed[1][0]()
    assert (calls[1][1].shape, calls[1][1].dtype, calls[1][1].transposed) == ((2, 4), "float16", False)
    monkeypatch.setitem(sys.modules, "cupy", None)
    assert baselines.cublas_time(8, 4, 2) is None  # neither library: no baseline
    with pytest.raises(ValueError, match="repeat must be a positive integer, got 0"):
        baselines.cublas_time(8, 4, 2, repeat=0)


def test_time_function_hands_its_arguments_to_tvms_timer():
    """Warm-up calls first, then TVM's time_evaluator with one call per measurement, `repeat`
    rounds of at least `min_repeat_ms`; its seconds come back as milliseconds."""
    log = []

    class Kernel:
        def __call__(self, *args):
            log.append(("call", args))

        def time_evaluator(self, name, dev, **kw):
            log.append(("evaluator", name, dev, kw))
            return lambda *args: log.append(("timed", args)) or types.SimpleNamespace(results=[0.002, 0.003])

    dev = types.SimpleNamespace(sync=lambda: log.append("sync"))
    assert bench.time_function(Kernel(), dev, ["a"], repeat=2, warmup=3, min_repeat_ms=50) == [2.0, 3.0]
    assert log == [("call", ("a",))] * 3 + ["sync", ("evaluator", "main", dev, dict(number=1, repeat=2, min_repeat_ms=50)),
                                            ("timed", ("a",))]
    log.clear()
    bench.time_function(Kernel(), dev, ["a"], warmup=0)
    assert log[:2] == ["sync", ("evaluator", "main", dev, dict(number=1, repeat=20, min_repeat_ms=20))]
    bench.time_function(Kernel(), dev, [])
    assert log.count(("call", ())) == 2  # two warm-up calls by default
    with pytest.raises(ValueError, match="^warmup must be >= 0, got -1$"):
        bench.time_function(Kernel(), dev, [], warmup=-1)
    with pytest.raises(TypeError, match="^expected a TVM function or module with time_evaluator$"):
        bench.time_function(lambda: None, dev, [], warmup=0)


# ---------------------------------------------------------------- what a measurement prints


def test_a_measurement_line_fits_120_characters_or_splits():
    where = "[recorded on G, 2026-11-22, TVM 0.27]"  # 37 characters
    m = lambda name: helpers.Measurement(name, ms=1.0, source="recorded", gpu="G", date="2026-11-22", tvm="0.27")
    fits = m("k" * (120 - 2 - len(where) - len(": 1.0000 ms")))
    assert str(fits) == f"{fits.name}: 1.0000 ms  {where}" and len(str(fits)) == 120
    over = m(fits.name + "k")
    assert str(over) == f"{over.name}: 1.0000 ms\n    {where}"
    assert str(dataclasses.replace(fits, rel_err=2.5e-7, flops=1e6, bytes=1.5e6)) == \
        f"{fits.name}: 1.0000 ms, 0.00 TFLOP/s, 2 GB/s\n    rel. error 2.5e-07  {where}"  # still over 120: the error moves down
    shorter = dataclasses.replace(fits, name="k" * 40, rel_err=2.5e-7, flops=1e6, bytes=1.5e6)
    assert str(shorter) == f"{shorter.name}: 1.0000 ms, 0.00 TFLOP/s, 2 GB/s, rel. error 2.5e-07\n    {where}"


# ---------------------------------------------------------------- a session's setting


def test_a_session_on_a_gpu_machine_uses_its_gpu(results_dir, monkeypatch, capsys):
    from conftest import H100

    gpu = object()
    monkeypatch.setattr(helpers.env, "gpu_available", lambda: True)
    monkeypatch.setattr(helpers.env, "device", lambda: gpu)
    monkeypatch.setattr(helpers.env, "local_gpu_spec", lambda: H100)
    monkeypatch.setattr(helpers.env, "make_target", lambda: "this GPU's target")
    monkeypatch.setattr(helpers.env.driver, "driver_cuda_version", lambda: None)
    nb = bench.Session("01_vector_add")
    assert (nb.live, nb.device, nb.spec, nb.target) == (True, gpu, H100, "this GPU's target")
    assert "running live\nGPU: NVIDIA H100 80GB HBM3" in capsys.readouterr().out


def test_a_session_without_records_or_gpu(results_dir, monkeypatch, capsys):
    if helpers.gpu_available():
        pytest.skip("tests the no-GPU path")
    monkeypatch.delenv("COURSE_ARCH", raising=False)
    mode.read()  # as helpers.start does
    nb = bench.Session("01_vector_add")
    assert nb.spec is None and not nb.live and nb.device is None
    assert capsys.readouterr().out.endswith("no GPU: building for sm_90; no recorded results to show\n")
    m = nb._recorded("add")
    assert (m.gpu, m.notebook, nb.results) == ("test-gpu", "01_vector_add", [m])  # the recorded GPU's folder
    cublas, torch = nb.cublas_matmul(8, 8, 8, quiet=True), nb.record("torch", 1.0)
    assert (cublas.name, cublas.ok, torch.name, torch.ok) == ("cuBLAS float32 8x8x8", False, "torch", False)
    assert bench.start("02_window_sum").notebook == "02_window_sum"
    monkeypatch.setenv("COURSE_ARCH", "sm_75")  # a simulated GPU gives the spec
    assert bench.Session("01_vector_add", quiet=True, run=mode.read()).spec.name == "Tesla T4"


def test_a_record_without_date_or_version_shows_question_marks(results_dir, capsys):
    if helpers.gpu_available():
        pytest.skip("tests the no-GPU path")
    (results_dir / "test-gpu").mkdir()
    (results_dir / "test-gpu" / "01_vector_add.json").write_text(
        '{"gpu": "Old GPU", "measurements": {"add": {"name": "add", "ms": 1.0}}}')
    bench.Session("01_vector_add")
    assert "showing results recorded on Old GPU on ? (TVM ?)" in capsys.readouterr().out


def test_without_a_gpu_the_kernel_is_still_built_for_the_sessions_target(results_dir, monkeypatch, vector_add,
                                                                        vector_add_args):
    if helpers.gpu_available():
        pytest.skip("tests the no-GPU path")
    built, build = [], bench.kernels.build
    monkeypatch.setattr(bench.kernels, "build", lambda kernel, target=None, tir_pipeline="default":
                        built.append(str(target.attrs["arch"])) or build(kernel, target, tir_pipeline))
    nb = bench.Session("01_vector_add", quiet=True, target=helpers.make_target("sm_80"))
    nb.measure("add", vector_add, vector_add_args[0], quiet=True)
    assert built == ["sm_80"]


def test_what_this_gpu_can_do(results_dir, monkeypatch, capsys):
    """The recorded Test GPU (compute capability 9.0, 227 KB of shared memory per block) has
    cp.async; a T4 does not, and the step says what it does instead."""
    if helpers.gpu_available():
        pytest.skip("tests the no-GPU path: a live session has this GPU's spec")
    monkeypatch.setattr(helpers.env, "_SAID", set())
    write_record(results_dir, "01_vector_add", "add")
    nb = bench.Session("01_vector_add", quiet=True)
    assert nb.supports("cp.async", "with synchronous copies") and nb.fits(227 * 1024, "with smaller tiles")
    assert nb._recorded("never recorded").gpu == "Test GPU"  # a missing result names the GPU it would be from
    assert not nb.fits(228 * 1024, "with smaller tiles")
    monkeypatch.setattr(bench.kernels, "why_not_here", lambda kernel, spec: f"{kernel} needs more than {spec.name}")
    assert not nb.can_run("k", "the untuned kernel runs")
    nb.spec = helpers.env.datasheet("Tesla T4").spec()
    assert not nb.supports("cp.async", "with synchronous copies")
    assert capsys.readouterr().out.splitlines() == [
        "this step needs 228 KB of shared memory per block; this Test GPU allows 227 KB, so this step runs with smaller tiles.",
        "k needs more than Test GPU, so the untuned kernel runs.",
        "cp.async needs compute capability 8.0; this Tesla T4 is 7.5, so this step runs with synchronous copies."]


@pytest.mark.skipif(helpers.gpu_available(), reason="tests the no-GPU path")
def test_a_notebook_recorded_on_another_gpu_reads_that_gpus_spec_and_copies(tmp_path, monkeypatch):
    """A notebook in mode.RECORDED_ON shows that GPU's records: its spec, the GPU a missing result names
    and the copy ceiling (notebook 00's records) are that GPU's; the other notebooks keep the default's."""
    monkeypatch.setattr(records, "RESULTS_DIR", tmp_path)
    monkeypatch.delenv("COURSE_RECORDED_GPU", raising=False)
    monkeypatch.delenv("COURSE_RECORD", raising=False)
    monkeypatch.setitem(mode.RECORDED_ON, "02_window_sum", "own-gpu")
    mode.read()  # as helpers.start does
    for folder, gpu, ms in ((records.DEFAULT_RECORDED_GPU, "Default GPU", 1.0), ("own-gpu", "Own GPU", 2.0)):
        copy = dict(name="copy 2^26 floats, float4", ms=ms, bytes=2.0 * 4 * bench.COPY_FLOATS, gpu=gpu,
                    notebook="00_gpu_architecture")
        device = dict(name=gpu, compute_capability="9.0", sm_count=132, clock_mhz=1980.0, dram_gbps=3352.0,
                      l2_bytes=1, shared_memory_per_block=49152, global_memory_bytes=1)
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "00_gpu_architecture.json").write_text(
            json.dumps(dict(gpu=gpu, device=device, measurements={copy["name"]: copy})))
    own, other = bench.Session("02_window_sum", quiet=True), bench.Session("01_vector_add", quiet=True)
    assert own.spec.name == "Own GPU" and other.spec.name == "Default GPU"
    assert own.copy_ceiling().ms == 2.0 and other.copy_ceiling().ms == 1.0
    assert own._recorded("never recorded").gpu == "Own GPU"


def test_a_notebooks_measurements_on_a_gpu_of_its_own(results_dir):
    write_record(results_dir, "01_vector_add", "on the recorded GPU")
    other = results_dir / "other-gpu"
    other.mkdir()
    (other / "01_vector_add.json").write_text('{"gpu": "Other", "measurements": {"k": {"name": "on the other", "ms": 1}}}')
    assert [m.name for m in helpers.recorded_measurements("01_vector_add", gpu="other-gpu")] == ["on the other"]
    assert [m.name for m in helpers.recorded_measurements("01_vector_add")] == ["on the recorded GPU"]
