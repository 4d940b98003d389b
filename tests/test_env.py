import sys
import types

import pytest
import tvm

import helpers
from helpers import env

from conftest import H100


def test_h100_peaks_follow_from_its_attributes():
    # 132 SMs x 128 lanes x 2 FLOP x 1.98 GHz, and 4096 fp16 tensor FLOP per SM per clock
    assert H100.peak_fp32_tflops == pytest.approx(66.9, abs=0.1)
    assert H100.peak_fp16_tc_tflops == pytest.approx(1070.5, abs=0.5)
    assert H100.has_tensor_cores and H100.arch == "sm_90"
    assert H100.ridge_point == pytest.approx(66.9e12 / 3352e9, rel=1e-3)


def test_unknown_gpu_has_no_peaks():
    odd = helpers.GpuSpec(name="Imaginary X1", compute_capability="4.2", sm_count=10, clock_mhz=1000,
                          dram_gbps=100, l2_bytes=0, shared_memory_per_block=0, global_memory_bytes=0)
    with pytest.raises(ValueError, match=r"unknown GPU 'Imaginary X1' \(compute capability 4.2\)"):
        odd.peak_fp32_tflops


def test_bandwidth_from_nvml(monkeypatch):
    """Without cuda-bindings or cupy, NVML's memory clock and bus width give the bandwidth:
    an H100 SXM reports 2619 MHz and 5120 bits, the 3352 GB/s of its data sheet."""
    calls = []
    fake = types.SimpleNamespace(
        NVML_CLOCK_MEM=2, nvmlInit=lambda: calls.append("init"), nvmlShutdown=lambda: calls.append("shutdown"),
        nvmlDeviceGetHandleByIndex=lambda i: "gpu0",
        nvmlDeviceGetMaxClockInfo=lambda h, kind: 2619 if kind == 2 else 1980,
        nvmlDeviceGetMemoryBusWidth=lambda h: 5120)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    assert env._dram_from_nvml() == pytest.approx(3352.3, abs=0.1)
    assert calls == ["init", "shutdown"]

    def no_driver():
        raise RuntimeError("NVML: driver not loaded")

    fake.nvmlInit = no_driver
    assert env._dram_from_nvml() is None  # no driver: the table by name takes over


def test_unknown_gpu_bandwidth_is_refused_by_name(monkeypatch):
    monkeypatch.setattr(env, "_dram_from_driver", lambda: None)
    assert env.dram_gbps("NVIDIA H100 80GB HBM3") == 3352
    assert env.dram_gbps("Tesla T4") == 320
    with pytest.raises(ValueError, match="unknown GPU 'Imaginary X1'"):
        env.dram_gbps("Imaginary X1")


def test_gpu_without_tensor_cores_is_refused():
    p100 = helpers.GpuSpec(name="Tesla P100", compute_capability="6.0", sm_count=56, clock_mhz=1480,
                           dram_gbps=732, l2_bytes=0, shared_memory_per_block=49152, global_memory_bytes=0)
    assert not p100.has_tensor_cores and p100.peak_fp16_tc_tflops == 0
    with pytest.raises(RuntimeError, match="Tesla P100 .*no tensor cores"):
        helpers.require_tensor_cores(p100)
    helpers.require_tensor_cores(H100)  # no error


@pytest.mark.parametrize("bad", ["cuda -arch=sm_80", "cudaa", {"kind": "no-such-kind"}])
def test_target_tvm_rejects_gets_a_clear_message(bad):
    with pytest.raises(ValueError, match="TVM rejected the target"):
        helpers.make_target(bad)


def test_targets_the_course_accepts():
    assert helpers.make_target("sm_80").attrs["arch"] == "sm_80"
    assert helpers.make_target({"kind": "cuda", "arch": "sm_75"}).kind.name == "cuda"
    assert str(helpers.listing_target().attrs["arch"]) == helpers.DEFAULT_ARCH
    default = helpers.make_target()
    assert default.kind.name == "cuda"
    if not helpers.gpu_available():
        assert str(default.attrs["arch"]) == helpers.DEFAULT_ARCH


def test_banner_names_the_source_of_the_numbers():
    live = env.banner_line(H100)
    assert "NVIDIA H100" in live and "66.9 TFLOP/s fp32" in live and "running live" in live
    rec = env.banner_line(None, {"gpu": "NVIDIA H100 80GB HBM3", "date": "2026-11-22", "tvm": "0.27.0.post1"})
    assert "no GPU" in rec and "recorded on NVIDIA H100 80GB HBM3 on 2026-11-22" in rec
    assert tvm.__version__ in rec


def test_device_without_gpu_says_so():
    if helpers.gpu_available():
        pytest.skip("a GPU is present")
    with pytest.raises(RuntimeError, match="no CUDA GPU"):
        helpers.device()
