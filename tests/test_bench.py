import numpy as np
import pytest
import tvm

import helpers
from helpers import bench, records

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
    with pytest.raises(ValueError, match="array A is on cpu.*not the GPU"):
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
    assert "no GPU" in banner and "recorded on Test GPU on 2026-11-22" in banner
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
