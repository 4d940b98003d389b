import dataclasses
import json
import sys
import types

import pytest
import tvm

import helpers
from helpers import env, mode

from conftest import H100


def test_h100_peaks_follow_from_its_attributes():
    # 132 SMs x 128 lanes x 2 FLOP x 1.98 GHz, and 4096 fp16 tensor FLOP per SM per clock
    assert H100.peak_fp32_tflops == pytest.approx(66.9, abs=0.1)
    assert H100.peak_fp16_tc_tflops == pytest.approx(989.4, abs=0.5)  # the data sheet's dense figure, at 1,830 MHz
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
    assert "989 TFLOP/s fp16" in live and max(map(len, live.splitlines())) <= 120
    rec = env.banner_line(None, {"gpu": "NVIDIA H100 80GB HBM3", "date": "2026-11-22", "tvm": "0.27.0.post1"})
    assert "no GPU" in rec and "recorded on NVIDIA H100 80GB HBM3 on 2026-11-22" in rec
    assert tvm.__version__ in rec


def test_device_without_gpu_says_so():
    if helpers.gpu_available():
        pytest.skip("a GPU is present")
    with pytest.raises(RuntimeError, match="no CUDA GPU"):
        helpers.device()


# The vendor's published figures (dense, no sparsity; fp16 tensor cores with fp32 accumulation):
# NVIDIA's data sheets for T4, L4, A100, H100 and H200, its Ampere (GA102) and Ada white papers for
# the RTX 3090 and 4090, AWS's figures for the A10G. The attributes are what each driver reports.
PUBLISHED = {  # name: (compute capability, SMs, boost MHz, fp32 TFLOP/s, fp16 tensor TFLOP/s, DRAM GB/s)
    "Tesla T4": ("7.5", 40, 1590, 8.1, 65, 320),
    "NVIDIA L4": ("8.9", 58, 2040, 30.3, 121, 300),
    "NVIDIA A10G": ("8.6", 80, 1710, 35.0, 70, 600),
    "NVIDIA A100-SXM4-40GB": ("8.0", 108, 1410, 19.5, 312, 1555),
    "NVIDIA A100-SXM4-80GB": ("8.0", 108, 1410, 19.5, 312, 2039),
    "NVIDIA GeForce RTX 3090": ("8.6", 82, 1695, 35.6, 71, 936),
    "NVIDIA GeForce RTX 4090": ("8.9", 128, 2520, 82.6, 165.2, 1008),
    "NVIDIA H100 80GB HBM3": ("9.0", 132, 1980, 67, 989.4, 3352),
    "NVIDIA H200": ("9.0", 132, 1980, 67, 989.4, 4800),
}


@pytest.mark.parametrize("name", PUBLISHED)
def test_peaks_of_the_gpus_students_have(name, monkeypatch):
    """From what its driver reports, each GPU's peaks match its vendor's figures: the per-SM rates
    (and the half-rate fp32 accumulation of GeForce cards and the A10G) are right."""
    cc, sms, mhz, fp32, fp16, dram = PUBLISHED[name]
    spec = helpers.GpuSpec(name=name, compute_capability=cc, sm_count=sms, clock_mhz=mhz, dram_gbps=None,
                           l2_bytes=0, shared_memory_per_block=49152, global_memory_bytes=0)
    assert spec.peak_fp32_tflops == pytest.approx(fp32, rel=0.01)
    assert spec.peak_fp16_tc_tflops == pytest.approx(fp16, rel=0.01)  # Hopper: at 1,830 MHz, not its boost clock
    monkeypatch.setattr(env, "_dram_from_driver", lambda: None)  # no driver: the data sheet answers
    assert env.dram_gbps(name) == dram
    assert spec.datasheet.name == name and spec.datasheet.fp16_tc_tflops == pytest.approx(fp16)


def test_names_match_whole_words():
    assert env.datasheet("NVIDIA L40S") is None  # not an L4
    assert env.datasheet("NVIDIA H100 PCIe") is None  # not the SXM part
    assert env.datasheet("NVIDIA A100-SXM4-80GB").dram_gbps == 2039


def test_shared_memory_limits_by_architecture():
    t4, a100, h100 = (env.datasheet(n).spec() for n in ("Tesla T4", "NVIDIA A100-SXM4-40GB", "NVIDIA H100 80GB HBM3"))
    assert (t4.max_shared_memory_per_block, a100.max_shared_memory_per_block) == (64 * 1024, 163 * 1024)
    assert h100.max_shared_memory_per_block == 227 * 1024
    assert env.lacks_shared_memory(t4, 100 * 1024) == ("this step needs 100 KB of shared memory per block; "
                                                        "this Tesla T4 allows 64 KB")
    assert env.lacks_shared_memory(a100, 100 * 1024) is None


def test_features_by_compute_capability():
    t4 = env.datasheet("Tesla T4").spec()
    assert env.lacks(t4, "cp.async") == "cp.async needs compute capability 8.0; this Tesla T4 is 7.5"
    assert env.lacks(t4, "tensor cores") is None
    assert env.lacks(H100, "ldmatrix + mma.sync m16n8k16") is None
    with pytest.raises(ValueError, match="unknown feature 'wgmma'"):
        env.lacks(t4, "wgmma")


def test_hopper_only_features():
    """wgmma (sm_90a) is Hopper's alone: older GPUs lack it, and so does Blackwell, which replaced it."""
    a100 = env.datasheet("NVIDIA A100-SXM4-40GB").spec()
    blackwell = dataclasses.replace(H100, name="NVIDIA B200", compute_capability="10.0")
    assert env.lacks(H100, "wgmma + TMA") is None
    assert env.lacks(a100, "wgmma + TMA") == "wgmma + TMA needs compute capability 9.0; this NVIDIA A100-SXM4-40GB is 8.0"
    assert env.lacks(blackwell, "wgmma + TMA") == "wgmma + TMA exists only on compute capability 9.x; this NVIDIA B200 is 10.0"
    assert env.lacks(blackwell, "cp.async") is None  # a feature no architecture dropped


def test_simulated_architecture(monkeypatch):
    if helpers.gpu_available():
        pytest.skip("a GPU is present: COURSE_ARCH only applies without one")
    monkeypatch.setenv("COURSE_ARCH", "sm_86")
    mode.read()  # as helpers.start does
    assert env.simulated_spec().name == "NVIDIA GeForce RTX 3090"
    assert str(helpers.make_target().attrs["arch"]) == "sm_86"
    assert str(helpers.listing_target().attrs["arch"]) == helpers.DEFAULT_ARCH  # listings stay the same
    monkeypatch.setenv("COURSE_ARCH", "sm_70")
    mode.read()  # as helpers.start does
    with pytest.raises(ValueError, match="COURSE_ARCH='sm_70' is not an architecture the course is built for"):
        env.simulated_arch()


@pytest.mark.parametrize("cuda, sees, expected", [
    (12040, False, "supports CUDA 12.4, but the pinned TVM wheels need CUDA 13 (driver 580.65.06 or newer)"),
    (13000, False, "TVM cannot load its CUDA runtime"),
    (13000, True, None),
    (None, False, None),  # no driver: simply a machine without a GPU
])
def test_driver_problems_in_one_sentence(cuda, sees, expected):
    problem = helpers.driver.driver_problem(cuda, sees)
    assert problem == expected if expected is None else expected in problem


# ---------------------------------------------------------------- what a driver reports, faked


def test_the_local_spec_reads_the_devices_attributes(monkeypatch):
    """A GPU's spec comes from its device attributes (the clock in kHz, the opt-in shared memory
    from the driver); a GPU whose bandwidth nobody knows gets none rather than an error."""
    dev = types.SimpleNamespace(device_name="NVIDIA Imaginary X1", compute_version="8.9", multi_processor_count=58,
                                max_clock_rate=2_040_000, l2_cache_size_bytes=48 << 20, max_shared_memory_per_block=49152,
                                total_global_memory=22 << 30)
    monkeypatch.setattr(env, "device", lambda: dev)
    monkeypatch.setattr(env.driver, "max_shared_memory_per_block_optin", lambda: 101376)
    monkeypatch.setattr(env, "_dram_from_driver", lambda: None)
    assert env.local_gpu_spec() == helpers.GpuSpec(
        name="NVIDIA Imaginary X1", compute_capability="8.9", sm_count=58, clock_mhz=2040.0, dram_gbps=None,
        l2_bytes=48 << 20, shared_memory_per_block=49152, global_memory_bytes=22 << 30, shared_memory_per_block_optin=101376)
    dev.device_name = "NVIDIA L4"
    assert env.local_gpu_spec().dram_gbps == 300  # by name, from its data sheet
    monkeypatch.setattr(env, "_dram_from_driver", lambda: 299.5)
    assert env.dram_gbps("NVIDIA L4") == env.local_gpu_spec().dram_gbps == 299.5  # the driver's own figure first


def test_the_device_and_target_are_gpu_0(monkeypatch):
    asked = []
    monkeypatch.setattr(tvm, "cuda", lambda i=0: asked.append(i) or types.SimpleNamespace(exist=True, id=i))
    assert env.device().id == 0
    monkeypatch.setattr(env, "gpu_available", lambda: True)
    monkeypatch.setattr(tvm.target.Target, "from_device", staticmethod(lambda dev: ("target of", dev.id)))
    assert env.make_target() == ("target of", 0)
    assert set(asked) == {0}
    monkeypatch.setattr(tvm, "cuda", lambda i=0: types.SimpleNamespace(exist=False))
    with pytest.raises(RuntimeError, match="^no CUDA GPU is visible to TVM: kernels can be built and read, not run$"):
        env.device()


@pytest.mark.parametrize("error, said", [(ValueError("parse error\n  at token 3\nunknown kind 'cudaa'"), "unknown kind 'cudaa'"),
                                         (RuntimeError(""), "RuntimeError")])
def test_a_rejected_target_quotes_tvms_last_line(monkeypatch, error, said):
    def reject(spec):
        raise error

    monkeypatch.setattr(tvm.target, "Target", reject)
    with pytest.raises(ValueError) as err:
        env.make_target("cudaa")
    assert str(err.value) == (f"TVM rejected the target 'cudaa': {said}. Write a target as a tag ('nvidia/nvidia-h100'), "
                              "a dict ({'kind': 'cuda', 'arch': 'sm_80'}) or an arch ('sm_80').")


def test_a_data_sheet_gives_the_spec_its_driver_would():
    assert env.datasheet("NVIDIA H100 80GB HBM3").spec() == helpers.GpuSpec(
        name="NVIDIA H100 80GB HBM3", compute_capability="9.0", sm_count=132, clock_mhz=1980, dram_gbps=3352,
        l2_bytes=50 << 20, shared_memory_per_block=48 * 1024, global_memory_bytes=80 << 30)


def test_names_match_without_the_vendor_prefix_and_in_any_case():
    assert env.datasheet("NVIDIA T4").name == "Tesla T4"
    assert env.datasheet("H100 80GB HBM3").name == "NVIDIA H100 80GB HBM3"
    assert env.datasheet("nvidia geforce rtx 4090").name == "NVIDIA GeForce RTX 4090"


def test_messages_name_what_is_known():
    with pytest.raises(ValueError) as err:
        env.arch_constants("4.2")
    assert str(err.value) == ("unknown GPU 'this GPU' (compute capability 4.2): no per-SM rates for it, so its peaks "
                              "cannot be computed. Known compute capabilities: 6.0, 6.1, 7.0, 7.5, 8.0, 8.6, 8.7, 8.9, 9.0.")
    with pytest.raises(ValueError, match=r"^unknown feature 'tma': one of tensor cores, cp.async, ldmatrix \+ mma.sync "
                                         r"m16n8k16, wgmma \+ TMA$"):
        env.lacks(H100, "tma")
    with pytest.raises(ValueError, match=r"no library of the driver answered \(through cuda-bindings, cupy or NVML\)\. "
                                         r"Measure it with notebook 00's copy kernel\.$"):
        env.dram_gbps("Imaginary X1")
    p100 = dataclasses.replace(H100, name="Tesla P100", compute_capability="6.0")
    with pytest.raises(RuntimeError, match=r"^Tesla P100 \(compute capability 6.0\) has no tensor cores: WMMA needs "
                                           r"compute capability 7.0 or newer. The kernel can still be built and read.$"):
        helpers.require_tensor_cores(p100)


def test_shared_memory_up_to_the_limit_fits():
    big = dataclasses.replace(H100, shared_memory_per_block_optin=1000 * 1024)
    assert env.lacks_shared_memory(big, 1000 * 1024) is None
    assert env.lacks_shared_memory(big, 2000 * 1024) == ("this step needs 2,000 KB of shared memory per block; this "
                                                         "NVIDIA H100 80GB HBM3 allows 1,000 KB")
    assert env.lacks_shared_memory(None, 10**9) is None  # no GPU to judge: the step runs


def test_several_simulated_architectures(monkeypatch):
    monkeypatch.setattr(env, "gpu_available", lambda: False)
    monkeypatch.setenv("COURSE_ARCH", "sm_75,sm_90")
    mode.read()  # as helpers.start does
    assert env.simulated_archs() == ["sm_75", "sm_90"]
    assert [s.name for s in env.simulated_specs()] == ["Tesla T4", "NVIDIA H100 80GB HBM3"]
    assert env.simulated_arch() == "sm_75"
    monkeypatch.setenv("COURSE_ARCH", "sm_70,sm_75,sm_99")
    mode.read()  # as helpers.start does
    with pytest.raises(ValueError, match=r"^COURSE_ARCH='sm_70,sm_99' is not an architecture the course is built for: "
                                         r"use one or more of sm_75, sm_80, sm_86, sm_89, sm_90$"):
        env.simulated_archs()
    monkeypatch.setattr(env, "gpu_available", lambda: True)
    assert env.simulated_archs() == [] and env.simulated_spec() is None  # a real GPU wins


def test_a_step_falls_back_once_and_logs_where_architectures_disagree(monkeypatch, tmp_path, capsys):
    """On a T4 standing for sm_75 and sm_90 at once, cp.async is missing on the first only: the
    step says what it does instead, once per cell, and the log notes both the fallback and that
    sm_90 would have chosen otherwise (the architecture tests then split the run)."""
    monkeypatch.setattr(env, "gpu_available", lambda: False)
    monkeypatch.setattr(env, "_SAID", set())
    monkeypatch.setenv("COURSE_ARCH", "sm_75,sm_90")
    mode.read()  # as helpers.start does
    monkeypatch.setenv("COURSE_BUILD_LOG", str(tmp_path / "log.jsonl"))
    mode.read()  # as helpers.start does
    t4 = env.simulated_spec()
    needs_cp_async = lambda spec: env.lacks(spec, "cp.async")
    assert env.decide(t4, needs_cp_async, "this step runs with synchronous copies") is False
    assert env.decide(t4, needs_cp_async, "this step runs with synchronous copies") is False
    assert env.decide(t4, lambda spec: env.lacks(spec, "tensor cores"), "never said") is True
    said = "cp.async needs compute capability 8.0; this Tesla T4 is 7.5, so this step runs with synchronous copies.\n"
    assert capsys.readouterr().out == said
    log = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    reason = "cp.async needs compute capability 8.0; this Tesla T4 is 7.5"
    assert log == [{"diverges": ["sm_90"], "reason": reason},
                   {"fallback": reason, "instead": "this step runs with synchronous copies"},
                   {"diverges": ["sm_90"], "reason": reason}]
    # the first architecture can, a later one cannot: the log gives the later one's reason
    monkeypatch.setenv("COURSE_ARCH", "sm_90,sm_75")
    mode.read()  # as helpers.start does
    assert env.decide(env.simulated_spec(), needs_cp_async, "x") is True
    assert json.loads((tmp_path / "log.jsonl").read_text().splitlines()[-1]) == {"diverges": ["sm_75"], "reason": reason}
    monkeypatch.delenv("COURSE_BUILD_LOG")
    mode.read()  # as helpers.start does
    env._log({"not": "written"})  # no log asked for: nothing written, no error


def test_banner_in_every_situation(monkeypatch):
    head = f"TVM {tvm.__version__}, Python {env.platform.python_version()}"
    monkeypatch.setattr(env, "gpu_available", lambda: False)
    monkeypatch.setattr(env.driver, "driver_cuda_version", lambda: None)
    monkeypatch.delenv("COURSE_ARCH", raising=False)
    mode.read()  # as helpers.start does
    assert env.banner_line(None) == f"{head} | no GPU: building for sm_90; no recorded results to show"
    p100 = dataclasses.replace(H100, name="Tesla P100", compute_capability="6.0", sm_count=56, clock_mhz=1480.0, dram_gbps=None)
    assert env.banner_line(p100) == (f"{head} | running live\nGPU: Tesla P100 (sm_60, 56 SMs @ 1,480 MHz): "
                                     "10.6 TFLOP/s fp32, DRAM bandwidth unknown")
    monkeypatch.setenv("COURSE_ARCH", "sm_75,sm_80,sm_90")
    mode.read()  # as helpers.start does
    assert env.banner_line(None, {"gpu": "G", "date": "d", "tvm": "t"}) == (
        f"{head} | no GPU: building every kernel for sm_75, sm_80, sm_90\nchoosing as for a Tesla T4 (COURSE_ARCH); "
        "results shown are recorded ones")
    # a driver too old for the pinned TVM: a third line says so
    monkeypatch.setattr(env.driver, "driver_cuda_version", lambda: 12040)
    assert env.banner_line(H100).splitlines()[2].startswith("This machine's NVIDIA driver supports CUDA 12.4, but")
    monkeypatch.setattr(env, "gpu_available", lambda: True)  # TVM uses the GPU after all: nothing to say
    assert len(env.banner_line(H100).splitlines()) == 2
