"""The environment: is there a GPU, which target to build for, and what this GPU can do.

Peaks are computed from the device's own attributes (SM count, clock, compute capability)
times per-architecture constants, so a student sees *their* GPU's numbers, not a datasheet's.
Without a GPU the course shows the GPU its results were recorded on (its attributes are kept
in the records), and builds for `DEFAULT_ARCH`.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import platform
import re

import tvm

from . import driver, mode, records
from .driver import dram_from_driver as _dram_from_driver, dram_from_nvml as _dram_from_nvml  # noqa: F401

driver.use_cuda_wheels()  # before anything asks TVM for a GPU

#: The arch we build for when there is no GPU. The course's results were recorded on an H100
#: (sm_90), so without a GPU the generated CUDA is the code that ran there.
DEFAULT_ARCH = "sm_90"

# Per compute capability: fp32 FMA lanes per SM, dense fp16 tensor-core FLOP per SM per clock
# (fp16 inputs, fp32 accumulation, at the full rate of the data-centre parts; GeForce cards run
# fp32 accumulation at half this), most resident threads, blocks and shared memory per SM.
_ARCH = {
    "7.0": dict(fp32_lanes=64, tc_flops=1024, threads=2048, blocks=32, smem=96 * 1024, smem_block=96 * 1024),
    "7.5": dict(fp32_lanes=64, tc_flops=1024, threads=1024, blocks=16, smem=64 * 1024, smem_block=64 * 1024),
    "8.0": dict(fp32_lanes=64, tc_flops=2048, threads=2048, blocks=32, smem=164 * 1024, smem_block=163 * 1024),
    "8.6": dict(fp32_lanes=128, tc_flops=1024, threads=1536, blocks=16, smem=100 * 1024, smem_block=99 * 1024),
    "8.7": dict(fp32_lanes=128, tc_flops=1024, threads=1536, blocks=16, smem=164 * 1024, smem_block=163 * 1024),
    "8.9": dict(fp32_lanes=128, tc_flops=1024, threads=1536, blocks=24, smem=100 * 1024, smem_block=99 * 1024),
    "9.0": dict(fp32_lanes=128, tc_flops=4096, threads=2048, blocks=32, smem=228 * 1024, smem_block=227 * 1024),
    "6.0": dict(fp32_lanes=64, tc_flops=0, threads=2048, blocks=32, smem=64 * 1024, smem_block=48 * 1024),
    "6.1": dict(fp32_lanes=128, tc_flops=0, threads=2048, blocks=32, smem=96 * 1024, smem_block=48 * 1024),
}

# GeForce cards (and AWS's A10G) run fp16 tensor-core math with fp32 accumulation at half the
# rate of the data-centre parts of the same architecture; the course accumulates in fp32.
_HALF_RATE_FP32_ACCUMULATE = ("GeForce", "A10G")
# Hopper's tensor cores reach their published dense rate at 1,830 MHz, not at the 1,980 MHz boost
# clock the driver reports (NVIDIA's H100 data sheet: 989 TFLOP/s fp16 = 132 SMs x 4096 x 1.83 GHz).
_TENSOR_CLOCK_MHZ = {"9.0": 1830}

@dataclasses.dataclass(frozen=True)
class Datasheet:
    """A GPU as its vendor describes it: the attributes its driver reports (name, compute
    capability, SMs, boost clock, L2, memory) and the published peaks (dense, no sparsity)."""

    name: str  # as the driver names it (`nvidia-smi`, `tvm.cuda(0).device_name`)
    compute_capability: str
    sm_count: int
    clock_mhz: float
    l2_mib: int
    memory_gib: float
    fp32_tflops: float
    fp16_tc_tflops: float  # fp16 inputs, fp32 accumulation
    dram_gbps: float

    def spec(self) -> "GpuSpec":
        """The `GpuSpec` this GPU's driver would report (used to build for a GPU we do not have)."""
        return GpuSpec(name=self.name, compute_capability=self.compute_capability, sm_count=self.sm_count,
                       clock_mhz=self.clock_mhz, dram_gbps=self.dram_gbps, l2_bytes=self.l2_mib << 20,
                       shared_memory_per_block=48 * 1024, global_memory_bytes=int(self.memory_gib * 2**30))


#: The GPUs students have. Figures from NVIDIA's data sheets and architecture white papers (the
#: A10G, which NVIDIA makes for AWS only, from AWS's published figures); tests/test_env.py checks
#: that each follows from the attributes its driver reports.
DATASHEETS = [
    Datasheet("Tesla T4", "7.5", 40, 1590, 4, 15, 8.1, 65, 320),
    Datasheet("NVIDIA L4", "8.9", 58, 2040, 48, 22, 30.3, 121, 300),
    Datasheet("NVIDIA A10G", "8.6", 80, 1710, 6, 22, 35.0, 70, 600),
    Datasheet("NVIDIA A100-SXM4-40GB", "8.0", 108, 1410, 40, 40, 19.5, 312, 1555),
    Datasheet("NVIDIA A100-SXM4-80GB", "8.0", 108, 1410, 40, 80, 19.5, 312, 2039),
    Datasheet("NVIDIA A100-PCIE-40GB", "8.0", 108, 1410, 40, 40, 19.5, 312, 1555),
    Datasheet("NVIDIA A100 80GB PCIe", "8.0", 108, 1410, 40, 80, 19.5, 312, 1935),
    Datasheet("NVIDIA GeForce RTX 3090", "8.6", 82, 1695, 6, 24, 35.6, 71, 936),
    Datasheet("NVIDIA GeForce RTX 4090", "8.9", 128, 2520, 72, 24, 82.6, 165.2, 1008),
    Datasheet("NVIDIA H100 80GB HBM3", "9.0", 132, 1980, 50, 80, 66.9, 989.4, 3352),
    Datasheet("NVIDIA H200", "9.0", 132, 1980, 60, 141, 66.9, 989.4, 4800),
]

#: One GPU per architecture the course is built for: what `COURSE_ARCH=sm_XX` pretends to be.
REPRESENTATIVE = {"sm_75": "Tesla T4", "sm_80": "NVIDIA A100-SXM4-40GB", "sm_86": "NVIDIA GeForce RTX 3090",
                  "sm_89": "NVIDIA L4", "sm_90": "NVIDIA H100 80GB HBM3"}


def datasheet(name: str) -> Datasheet | None:
    """The data sheet of the GPU the driver calls `name`, or None. Names match as whole words,
    so an "NVIDIA L40S" is not taken for an "NVIDIA L4"."""
    for sheet in sorted(DATASHEETS, key=lambda d: -len(d.name)):
        short = sheet.name.removeprefix("NVIDIA ").removeprefix("Tesla ")
        if re.search(rf"(?<![\w-]){re.escape(short)}(?![\w-])", name, flags=re.I):
            return sheet
    return None

_REGS_PER_SM = 65536
_REG_ALLOC_UNIT = 256  # registers are handed to a warp in chunks of 256
_MAX_REGS_PER_THREAD = 255


@dataclasses.dataclass(frozen=True)
class GpuSpec:
    """What one GPU can do, from its own attributes."""

    name: str
    compute_capability: str
    sm_count: int
    clock_mhz: float
    dram_gbps: float | None
    l2_bytes: int
    shared_memory_per_block: int  # without opting in (48 KB)
    global_memory_bytes: int
    shared_memory_per_block_optin: int | None = None  # from the driver; None: by compute capability

    @property
    def arch(self) -> str:
        return "sm_" + self.compute_capability.replace(".", "")

    @property
    def _consts(self) -> dict:
        return arch_constants(self.compute_capability, self.name)

    @property
    def peak_fp32_tflops(self) -> float:
        """SMs x FMA lanes x 2 FLOP x clock."""
        return self.sm_count * self._consts["fp32_lanes"] * 2 * self.clock_mhz * 1e6 / 1e12

    @property
    def peak_fp16_tc_tflops(self) -> float:
        """Dense fp16 tensor-core rate (fp32 accumulate), at the clock the data sheet counts it at;
        0 when there are no tensor cores."""
        half = any(word.lower() in self.name.lower() for word in _HALF_RATE_FP32_ACCUMULATE)
        return self.sm_count * self._consts["tc_flops"] * (0.5 if half else 1) * self.tensor_clock_mhz * 1e6 / 1e12

    @property
    def tensor_clock_mhz(self) -> float:
        """The clock the data sheet counts tensor-core math at: the boost clock, but 1,830 MHz on Hopper."""
        return min(self.clock_mhz, _TENSOR_CLOCK_MHZ.get(self.compute_capability, self.clock_mhz))

    @property
    def has_tensor_cores(self) -> bool:
        return self._consts["tc_flops"] > 0

    @property
    def max_threads_per_sm(self) -> int:
        return self._consts["threads"]

    @property
    def max_blocks_per_sm(self) -> int:
        return self._consts["blocks"]

    @property
    def registers_per_sm(self) -> int:
        """32-bit registers one SM shares among its resident threads (64 Ki on every arch here)."""
        return _REGS_PER_SM

    @property
    def shared_memory_per_sm(self) -> int:
        return self._consts["smem"]

    @property
    def max_shared_memory_per_block(self) -> int:
        """The most shared memory one block can have (dynamic, after opting in): what bounds a
        kernel's tiles and pipeline stages on this GPU."""
        return self.shared_memory_per_block_optin or self._consts["smem_block"]

    @property
    def datasheet(self) -> Datasheet | None:
        return datasheet(self.name)

    @property
    def ridge_point(self) -> float:
        """FLOP per byte where the fp32 roof meets the bandwidth roof."""
        if not self.dram_gbps:
            raise ValueError(f"the DRAM bandwidth of {self.name!r} is unknown")
        return self.peak_fp32_tflops * 1e12 / (self.dram_gbps * 1e9)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def arch_constants(compute_capability: str, name: str = "this GPU") -> dict:
    """Per-architecture constants; a clear error for an architecture the table lacks."""
    if compute_capability not in _ARCH:
        known = ", ".join(sorted(_ARCH))
        raise ValueError(
            f"unknown GPU {name!r} (compute capability {compute_capability}): no per-SM rates "
            f"for it, so its peaks cannot be computed. Known compute capabilities: {known}."
        )
    return _ARCH[compute_capability]


def gpu_available() -> bool:
    """True when TVM can see a CUDA device (and so kernels can run)."""
    return bool(tvm.cuda(0).exist)


def device():
    """The CUDA device, or a clear error saying there is none."""
    dev = tvm.cuda(0)
    if not dev.exist:
        raise RuntimeError("no CUDA GPU is visible to TVM: kernels can be built and read, not run")
    return dev


def dram_gbps(name: str) -> float:
    """Theoretical DRAM bandwidth: from the driver (memory clock x bus width) or by name."""
    measured = _dram_from_driver()
    if measured:
        return measured
    sheet = datasheet(name)
    if sheet:
        return float(sheet.dram_gbps)
    raise ValueError(
        f"unknown GPU {name!r}: its DRAM bandwidth is not in helpers' table and no library of "
        "the driver answered (through cuda-bindings, cupy or NVML). Measure it with notebook 00's copy kernel."
    )


def local_gpu_spec() -> GpuSpec:
    """The spec of the GPU in this machine, read from its attributes."""
    dev = device()
    name = dev.device_name
    try:
        bandwidth = dram_gbps(name)
    except ValueError:
        bandwidth = None
    return GpuSpec(
        name=name,
        compute_capability=dev.compute_version,
        sm_count=dev.multi_processor_count,
        clock_mhz=dev.max_clock_rate / 1000,
        dram_gbps=bandwidth,
        l2_bytes=dev.l2_cache_size_bytes,
        shared_memory_per_block=dev.max_shared_memory_per_block,
        global_memory_bytes=dev.total_global_memory,
        shared_memory_per_block_optin=driver.max_shared_memory_per_block_optin(),
    )


def simulated_archs(run: mode.Mode | None = None) -> list[str]:
    """The architectures `COURSE_ARCH` (e.g. "sm_75" or "sm_80,sm_90") asks a machine without a
    GPU to build every kernel for, as if it had their representative GPUs; [] when unset or when
    a GPU is here. Several architectures share one run of a notebook where its choices agree.
    `run`: the mode asked (a session's), `mode.current()` unless given."""
    archs = list((run or mode.current()).archs)
    if not archs or gpu_available():
        return []
    unknown = [a for a in archs if a not in REPRESENTATIVE]
    if unknown:
        raise ValueError(f"COURSE_ARCH={','.join(unknown)!r} is not an architecture the course is built for: "
                         f"use one or more of {', '.join(REPRESENTATIVE)}")
    return archs


def simulated_arch() -> str | None:
    """The first of `simulated_archs()`: the one a simulated run's choices are made for."""
    return next(iter(simulated_archs()), None)


def simulated_specs() -> list[GpuSpec]:
    """The GPUs `COURSE_ARCH` stands for (e.g. a Tesla T4 for sm_75)."""
    return [datasheet(REPRESENTATIVE[a]).spec() for a in simulated_archs()]


def simulated_spec() -> GpuSpec | None:
    """The GPU whose limits a simulated run's choices follow, or None."""
    return next(iter(simulated_specs()), None)


def decide(spec: GpuSpec | None, why_not, consequence: str) -> bool:
    """Whether a step can run on `spec`'s GPU: `why_not(spec)` gives the reason it cannot, or None.
    If it cannot, say so in one line with its `consequence` (`fallback`). A run that stands for
    several architectures (`COURSE_ARCH`) checks each one too: a different answer is logged for
    the architecture tests, which then split the run."""
    reason = why_not(spec)
    others = {s.arch: why_not(s) for s in simulated_specs()[1:]}
    split = [arch for arch, r in others.items() if (r is None) != (reason is None)]
    if split:
        _log({"diverges": split, "reason": reason or next(r for r in others.values() if r)})
    if reason:
        fallback(reason, consequence)
    return reason is None


def _log(event: dict) -> None:
    log = mode.current().build_log
    if log:
        with open(log, "a") as f:
            f.write(json.dumps(event) + "\n")


def make_target(spec: str | dict | None = None) -> tvm.target.Target:
    """A TVM target: the local GPU's, or `DEFAULT_ARCH` with no GPU (`COURSE_ARCH` if set), or
    the one asked for.

    `spec` may be a tag ("nvidia/nvidia-h100"), a JSON-style dict ({"kind": "cuda", "arch":
    "sm_80"}) or an arch string ("sm_80"). A string TVM rejects gets a message that says how
    targets are written in TVM 0.27 (the old "cuda -arch=sm_80" form is gone).
    """
    if spec is None:
        if gpu_available():
            return tvm.target.Target.from_device(tvm.cuda(0))
        return tvm.target.Target({"kind": "cuda", "arch": simulated_arch() or DEFAULT_ARCH})
    if isinstance(spec, str) and spec.startswith("sm_"):
        spec = {"kind": "cuda", "arch": spec}
    if isinstance(spec, dict) and spec.get("kind") == "cuda" and "arch" in spec:
        check_arch(spec["arch"])
    try:
        return tvm.target.Target(spec)
    except Exception as err:  # TVM raises ValueError or its own error types
        first = str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__
        raise ValueError(
            f"TVM rejected the target {spec!r}: {first}. Write a target as a tag "
            "('nvidia/nvidia-h100'), a dict ({'kind': 'cuda', 'arch': 'sm_80'}) or an arch ('sm_80')."
        ) from None


def known_archs() -> list[str]:
    """The architectures the course builds for: sm_XY for each compute capability in `_ARCH`, then
    the arch-specific sm_XYa of each whose features later architectures dropped (`LAST`)."""
    plain = [f"sm_{cc.replace('.', '')}" for cc in sorted(_ARCH, key=_cc)]
    return plain + [f"sm_{cc.replace('.', '')}a" for cc in sorted(set(LAST.values()), key=_cc)]


def check_arch(arch) -> None:
    """Refuse an architecture the course does not know (TVM itself takes any "sm_..." silently)."""
    known = known_archs()
    if arch not in known:
        plain = [a for a in known if not a.endswith("a")]
        raise ValueError(f"unknown GPU architecture {arch!r}: the course knows {', '.join(plain)} "
                         f"(and {', '.join(known[len(plain):])})")


def listing_target() -> tvm.target.Target:
    """The target whose generated code the notebooks print: fixed, so listings are the same on
    every machine (and CI can check them), whatever GPU the student has."""
    return tvm.target.Target({"kind": "cuda", "arch": DEFAULT_ARCH})


#: What a schedule step may need that older GPUs lack: the oldest compute capability that has it.
FEATURES = {
    "tensor cores": "7.0",  # WMMA
    "cp.async": "8.0",  # asynchronous global-to-shared copies
    "ldmatrix + mma.sync m16n8k16": "8.0",
    "wgmma + TMA": "9.0",  # Hopper's warpgroup MMA fed by the tensor memory accelerator (sm_90a)
}
#: Features a later architecture dropped: the newest compute capability that has each. Blackwell
#: (10.x, 12.x) replaced wgmma with tcgen05, so an sm_90a kernel runs on Hopper alone.
LAST = {"wgmma + TMA": "9.0"}


def _cc(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def runs_arch(spec: GpuSpec | None, arch: str) -> bool:
    """Whether `spec`'s GPU runs code built for `arch`: "sm_80" on compute capability 8.0 or newer, an
    architecture-specific "sm_90a" (wgmma, TMA) on 9.0 alone."""
    check_arch(arch)
    if spec is None:
        return False
    cc, wanted = _cc(spec.compute_capability), _cc(f"{arch[3:-2] if arch.endswith('a') else arch[3:-1]}.{arch.rstrip('a')[-1]}")
    return cc == wanted if arch.endswith("a") else cc >= wanted


def lacks(spec: GpuSpec | None, feature: str) -> str | None:
    """Why `spec`'s GPU cannot run a step that needs `feature` (one clause), or None if it can."""
    if feature not in FEATURES:
        raise ValueError(f"unknown feature {feature!r}: one of {', '.join(FEATURES)}")
    if spec is None:
        return None
    cc, first, last = _cc(spec.compute_capability), FEATURES[feature], LAST.get(feature)
    if last and cc[0] > _cc(last)[0]:
        return f"{feature} exists only on compute capability {_cc(last)[0]}.x; this {spec.name} is {spec.compute_capability}"
    if cc >= _cc(first):
        return None
    return f"{feature} needs compute capability {first}; this {spec.name} is {spec.compute_capability}"


def lacks_shared_memory(spec: GpuSpec | None, nbytes: int) -> str | None:
    """Why a block with `nbytes` of shared memory cannot run on `spec`'s GPU, or None if it can."""
    if spec is None or nbytes <= spec.max_shared_memory_per_block:
        return None
    return (f"this step needs {nbytes / 1024:,.0f} KB of shared memory per block; this {spec.name} allows "
            f"{spec.max_shared_memory_per_block / 1024:,.0f} KB")


_SAID: set[str] = set()


def fallback(reason: str, consequence: str) -> None:
    """Say in one line what this GPU lacks and what happens instead ("<reason>, so
    <consequence>."), and note it for the architecture tests (`COURSE_BUILD_LOG`)."""
    line = f"{reason}, so {consequence}."
    if line in _SAID:  # once is enough when several steps of a cell fall back alike
        return
    _SAID.add(line)
    print(line)
    _log({"fallback": reason, "instead": consequence})


def require_tensor_cores(spec: GpuSpec) -> None:
    """Refuse clearly when a tensor-core kernel is asked of a GPU without tensor cores."""
    if not spec.has_tensor_cores:
        raise RuntimeError(
            f"{spec.name} (compute capability {spec.compute_capability}) has no tensor cores: "
            "WMMA needs compute capability 7.0 or newer. The kernel can still be built and read."
        )


def banner_line(spec: GpuSpec | None, recorded: dict | None = None) -> str:
    """Two short lines for the top of a notebook: TVM version and where the numbers come from, then
    the GPU (live or recorded); a third when the driver has a GPU that TVM cannot use, saying why."""
    problem = driver.driver_problem(driver.driver_cuda_version(), gpu_available())
    return _banner(spec, recorded) + (f"\n{problem}" if problem else "")


def _banner(spec: GpuSpec | None, recorded: dict | None) -> str:
    head = f"TVM {tvm.__version__}, Python {platform.python_version()}"
    simulated = simulated_spec()
    if spec is None and simulated is not None:
        also = "".join(f", {s.arch}" for s in simulated_specs()[1:])
        return (f"{head} | no GPU: building every kernel for {simulated.arch}{also}\nchoosing as for a "
                f"{simulated.name} (COURSE_ARCH); results shown are recorded ones")
    if spec is not None:
        bw = f"{spec.dram_gbps:,.0f} GB/s" if spec.dram_gbps else "DRAM bandwidth unknown"
        tc = f", {spec.peak_fp16_tc_tflops:,.0f} TFLOP/s fp16 tensor core" if spec.has_tensor_cores else ""
        return (f"{head} | running live\nGPU: {spec.name} ({spec.arch}, {spec.sm_count} SMs @ {spec.clock_mhz:,.0f} "
                f"MHz): {spec.peak_fp32_tflops:,.1f} TFLOP/s fp32{tc}, {bw}")
    if recorded:
        return (f"{head} | no GPU: building for {DEFAULT_ARCH}\nshowing results recorded on "
                f"{recorded['gpu']} on {recorded['date']} (TVM {recorded['tvm']})")
    return f"{head} | no GPU: building for {DEFAULT_ARCH}; no recorded results to show"


#: Where the notebooks are (fixed at import: the tests point `records.RESULTS_DIR` elsewhere).
NOTEBOOKS_DIR = records.RESULTS_DIR.parent


def check_notebook(notebook) -> None:
    """Refuse a name that is none of the course's notebooks (notebooks/NN_topic.ipynb, named
    without the suffix); any name goes where helpers were copied without their notebooks."""
    names = sorted(path.stem for path in NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb"))
    if names and notebook not in names:
        raise ValueError(f"no notebook named {notebook!r} in notebooks/: the notebooks are {', '.join(names)}")


def today() -> str:
    return datetime.date.today().isoformat()
