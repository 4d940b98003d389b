"""What the NVIDIA driver says, and the CUDA libraries TVM needs to use it.

The pinned TVM wheel is built against CUDA 13: its CUDA runtime (`libtvm_runtime_cuda.so`) needs
`libcudart.so.13` and a driver that speaks CUDA 13 (driver 580 or newer), and it compiles kernels
with NVRTC through `cuda-bindings`, which needs `libnvrtc.so.13` and the CUDA headers. When any of
these is missing TVM does not fail: it quietly sees no GPU. A machine with a CUDA 12 toolkit (Colab)
or none at all (a fresh virtual environment) would then run the course as if it had no GPU.

requirements.txt therefore installs the CUDA 13 runtime, NVRTC and headers as NVIDIA's own wheels,
and `use_cuda_wheels()` (run when `helpers` is imported) points TVM at them. On Colab only the
runtime is installed (requirements-colab.txt): NVRTC and headers are Colab's own CUDA 12. `driver_problem()`
turns "TVM sees no GPU but the driver sees one" into one sentence that says why.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
from pathlib import Path

#: The oldest CUDA the pinned wheels run on, as the driver reports it (major * 1000 + minor * 10),
#: and the oldest Linux driver that provides it (CUDA 13.0's release notes).
MIN_CUDA = 13000
MIN_DRIVER = "580.65.06"


def cuda_wheel_root() -> Path | None:
    """The folder of NVIDIA's CUDA 13 wheels (nvidia/cu13/), if nvidia-cuda-runtime is installed."""
    spec = importlib.util.find_spec("nvidia")
    for base in (spec.submodule_search_locations or []) if spec else []:
        root = Path(base) / "cu13"
        if (root / "lib" / "libcudart.so.13").exists():
            return root
    return None


def nvrtc_headers_from_wheels(root: Path | None) -> bool:
    """Whether TVM should compile with the wheels' CUDA 13 headers: only when they are all there (the
    runtime, crt and cccl wheels) and NVRTC is CUDA 13's too (cuda-bindings 13, as requirements.txt
    installs). Colab keeps its cuda-bindings 12.9, whose NVRTC 12 goes with Colab's own CUDA 12
    toolkit, which TVM finds by itself (through `nvcc` on the PATH)."""
    from importlib import metadata

    headers = ("cuda_runtime.h", "crt/mma.h", "cccl/cuda/std/cstdint")
    if root is None or not all((root / "include" / h).exists() for h in headers):
        return False
    try:
        return metadata.version("cuda-bindings").split(".")[0] == "13"
    except metadata.PackageNotFoundError:
        return False


def use_cuda_wheels() -> bool:
    """Point TVM at the CUDA 13 wheels: load their `libcudart.so.13` so TVM's CUDA runtime can
    load, and compile with their NVRTC headers (matching NVRTC's version) unless CUDA_PATH says
    otherwise. Returns whether TVM's CUDA runtime is loaded afterwards."""
    from tvm.base import _LOADED_LIBS
    from tvm_ffi.libinfo import load_lib_ctypes

    root = cuda_wheel_root()
    if nvrtc_headers_from_wheels(root):
        os.environ.setdefault("CUDA_PATH", str(root))
        if os.environ["CUDA_PATH"] == str(root):
            cccl = f"-I{root / 'include' / 'cccl'}"
            extra = os.environ.get("TVM_CUDA_NVRTC_EXTRA_OPTS", "")
            if cccl not in extra:
                os.environ["TVM_CUDA_NVRTC_EXTRA_OPTS"] = f"{extra} {cccl}".strip()
    if "tvm_runtime_cuda" in _LOADED_LIBS or root is None or _libcuda() is None:
        return "tvm_runtime_cuda" in _LOADED_LIBS
    try:  # once loaded, the soname libcudart.so.13 resolves to this copy: load TVM's CUDA runtime again
        ctypes.CDLL(str(root / "lib" / "libcudart.so.13"), mode=ctypes.RTLD_GLOBAL)
        _LOADED_LIBS["tvm_runtime_cuda"] = load_lib_ctypes(
            package="tvm", target_name="tvm_runtime_cuda", mode="RTLD_LOCAL",
            extra_lib_paths=[Path(_LOADED_LIBS["tvm_runtime"]._name).resolve().parent])
    except (OSError, RuntimeError):
        pass
    return "tvm_runtime_cuda" in _LOADED_LIBS


def _libcuda():
    try:
        return ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None


def driver_cuda_version() -> int | None:
    """The newest CUDA the installed driver supports (e.g. 13000 for 13.0), or None without one."""
    lib = _libcuda()
    if lib is None:
        return None
    version = ctypes.c_int(0)
    if lib.cuDriverGetVersion(ctypes.byref(version)) != 0:
        return None
    return version.value


def driver_problem(cuda_version: int | None, tvm_sees_gpu: bool) -> str | None:
    """One sentence on why TVM cannot use this machine's GPU, or None when nothing is wrong
    (a GPU TVM can use, or simply no NVIDIA driver: a machine without a GPU)."""
    if tvm_sees_gpu or cuda_version is None:
        return None
    have = f"{cuda_version // 1000}.{cuda_version % 1000 // 10}"
    if cuda_version < MIN_CUDA:
        return (f"This machine's NVIDIA driver supports CUDA {have}, but the pinned TVM wheels need CUDA 13 "
                f"(driver {MIN_DRIVER} or newer): update the driver, or run without the GPU.")
    return ("The NVIDIA driver (CUDA {have}) is there, but TVM cannot load its CUDA runtime: install the "
            "course's requirements (pip install -r requirements.txt brings libcudart 13 and NVRTC).").format(have=have)


def max_shared_memory_per_block_optin() -> int | None:
    """The most shared memory one block may ask for (cudaDevAttrMaxSharedMemoryPerBlockOptin),
    from the driver of GPU 0; None without one."""
    lib = _libcuda()
    if lib is None or lib.cuInit(0) != 0:
        return None
    value = ctypes.c_int(0)
    attribute = 97  # CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
    if lib.cuDeviceGetAttribute(ctypes.byref(value), attribute, 0) != 0:
        return None
    return value.value


def dram_from_driver() -> float | None:
    """Theoretical DRAM bandwidth in GB/s (memory clock x bus width, double data rate) as the
    driver reports it through cuda-bindings, cupy or NVML; None when none of them answers."""
    try:
        from cuda.bindings import runtime as rt

        attr = rt.cudaDeviceAttr
        err, clock_khz = rt.cudaDeviceGetAttribute(attr.cudaDevAttrMemoryClockRate, 0)
        err2, bus_bits = rt.cudaDeviceGetAttribute(attr.cudaDevAttrGlobalMemoryBusWidth, 0)
        if int(err) == 0 and int(err2) == 0 and clock_khz and bus_bits:
            return 2 * clock_khz * 1e3 * bus_bits / 8 / 1e9  # double data rate
    except Exception:
        pass
    try:
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(0)
        if props.get("memoryClockRate") and props.get("memoryBusWidth"):
            return 2 * props["memoryClockRate"] * 1e3 * props["memoryBusWidth"] / 8 / 1e9
    except Exception:
        pass
    return dram_from_nvml()


def dram_from_nvml() -> float | None:
    """The same product from NVML, the driver's management library (nvidia-ml-py, a pinned
    dependency): it needs only the driver, so it answers on any NVIDIA machine."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            mhz = pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_MEM)
            bits = pynvml.nvmlDeviceGetMemoryBusWidth(handle)
        finally:
            pynvml.nvmlShutdown()
        if mhz and bits:
            return 2 * mhz * 1e6 * bits / 8 / 1e9
    except Exception:
        pass
    return None
