"""Hopper's own matrix path from TVM 0.27's TIRx: wgmma (warpgroup MMA) fed by TMA (bulk tensor
copies completing on mbarriers), for notebook 06's fp16 workload (C = A @ B at 4096^3, fp16 A and
B with B stored K x N, fp32 C).

    python gpu/experiments/07_hopper.py STUDY           # on a GPU
    python gpu/experiments/07_hopper.py STUDY --dry     # no GPU: build each variant for sm_90a

The mma.sync kernels of 06_fp16.py stop near 55% of cuBLAS: Hopper's tensor cores are fed at
full speed only by `wgmma`, which TensorIR's schedules cannot emit but TIRx, TVM's lower-level
dialect, writes as PTX (`T.ptx[...]`). Notebook 07 writes the kernel instruction by instruction
(this script runs its cells):

  * a block computes 128 x BN of C, k in steps of 64 halves (128 bytes: one 128-byte swizzle row);
  * one thread copies each k step's A tile (128 x 64) and B tile (64 x BN, as BN/64 boxes of
    64 x 64) into a ring of shared-memory stages with TMA, 128-byte swizzled, as wgmma reads them;
  * two consumer warpgroups each multiply 64 rows of the A tile by the whole B tile with four
    `wgmma.m64nBNk16` per stage, accumulating in registers, then store C straight from them.

The studies:

  wgmma   every variant built for sm_90a; on the GPU each is checked against float64 and timed
          beside cuBLAS fp16 in the same run. --dry prints, per variant, the build time, the CUDA's
          length and, from the machine code (needs cuobjdump and nvdisasm), its HGMMA and UTMALDG
          instructions, registers per thread and local-memory (spill) instructions
  epilogue  the persistent kernel (grouped order) writing C from its registers or through shared
          memory and the TMA, in fp32 and fp16: each checked against float64, then timed in rounds
          alternating with cuBLAS writing C in the same type
  repro   the one TIRx construct these kernels wanted and 0.27 cannot compile: wgmma's register
          fence `T.cuda.wgmma.noop_barrier` on an accumulator (`repro --dry` needs no GPU)

The variants are built for sm_90a whatever GPU runs them (wgmma and setmaxnreg exist only there;
the local GPU's own target, sm_90, rejects them).
"""

from __future__ import annotations

import dataclasses
import functools
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


import helpers
from helpers import baselines
from common import ONLY, MatmulCheck, Study, Variant, beside_cublas, cli, dry_run, fp16_matmuls_beside_cublas, notebook_code

N = 4096
SHAPE = (N, N, N)

# The kernel and the designs compared are notebook 07's: its cell of constants (VARIANTS: name ->
# block_n, stages, specialized), its macros and its `hopper_matmul`, run as a module.
NOTEBOOK = notebook_code("07_hopper_wgmma_tma", "BM, BK = ", "@T.macro", "def hopper_matmul(", "def persistent_matmul(")
KERNELS = NOTEBOOK.VARIANTS


def variants() -> list[Variant]:
    return [Variant(name, functools.partial(NOTEBOOK.hopper_matmul, N, N, N, *args), SHAPE, {}, "tirx", "sm_90a")
            for name, args in KERNELS.items()]


# ------------------------------------------------------------------ machine code


@dataclasses.dataclass
class Sass:
    """What the machine code of a kernel shows: instruction counts, registers, local memory."""

    counts: dict
    registers: int
    local_bytes: int

    def __str__(self) -> str:
        spills = self.counts["LDL"] + self.counts["STL"]
        return (f"{self.counts['HGMMA']} HGMMA, {self.counts['UTMALDG']} UTMALDG, {self.registers} registers, "
                + (f"SPILLS ({spills} LDL/STL, {self.local_bytes} B local)" if spills or self.local_bytes
                   else "no spills"))


def sass_of(source: str) -> Sass | str:
    """Compile the CUDA to an sm_90a cubin with NVRTC, as TVM does on a GPU, and read it with
    cuobjdump (which needs nvdisasm beside it); a sentence instead when those are missing."""
    from tvm.support import nvcc

    if not (shutil.which("cuobjdump") and shutil.which("nvdisasm")):
        return "no cuobjdump and nvdisasm here to read the machine code"
    cubin = nvcc.compile_cuda(source, target_format="cubin", arch="sm_90a", compiler="nvrtc")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        sass = subprocess.run(["cuobjdump", "-sass", str(path)], capture_output=True, text=True, check=True).stdout
        usage = subprocess.run(["cuobjdump", "-res-usage", str(path)], capture_output=True, text=True,
                               check=True).stdout
    counts = {op: len(re.findall(rf"\b{op}\b", sass)) for op in ("HGMMA", "UTMALDG", "LDL", "STL")}
    registers = re.search(r"REG:(\d+)", usage)
    local = re.search(r"LOCAL:(\d+)", usage)
    return Sass(counts, int(registers.group(1)) if registers else -1, int(local.group(1)) if local else -1)


def shared_and_sass(v: Variant, source: str) -> str:
    """A dry run's extra words on a variant: its shared memory and what its machine code holds."""
    return f"{NOTEBOOK.shared_bytes(*KERNELS[v.name][:2]) / 1024:.0f} KB shared; {sass_of(source)}"


# ------------------------------------------------------------------ the studies


def wgmma(args) -> int:
    vs = [v for v in variants() if not args.only or args.only in v.name]
    if not vs:
        print(f"no variant's name contains {args.only!r}: {', '.join(KERNELS)}", file=sys.stderr)
        return 2
    return dry_run(vs, shared_and_sass) if args.dry else fp16_matmuls_beside_cublas(vs, N)


EPILOGUES = {  # name: persistent_matmul's arguments besides the shape and the number of blocks
    "persistent, fp32 C from registers": dict(),
    "persistent, fp32 C through shared + TMA": dict(tma_store=True),
    "persistent, fp16 C from registers": dict(out_dtype="float16"),
    "persistent, fp16 C through shared + TMA": dict(out_dtype="float16", tma_store=True),
    "persistent, fp16 C through shared + TMA, 3 stages": dict(out_dtype="float16", tma_store=True, stages=3),
    "persistent, fp16 C through shared + TMA, groups of 16": dict(out_dtype="float16", tma_store=True, group=16),
    "persistent, 128x128, 6 stages, fp16 C through shared + TMA": dict(out_dtype="float16", tma_store=True,
                                                                       block_n=128, stages=6),
}


def epilogue(args) -> int:
    ctas = helpers.local_gpu_spec().sm_count if not args.dry else 132  # one block per SM (an H100's 132 to build)
    vs = [Variant(name, functools.partial(NOTEBOOK.persistent_matmul, N, N, N, ctas, **kw), SHAPE, {}, "tirx", "sm_90a")
          for name, kw in EPILOGUES.items() if not args.only or args.only in name]
    if args.dry:
        return dry_run(vs, lambda v, _: f"C in {EPILOGUES[v.name].get('out_dtype', 'float32')}")
    out = {v.name: EPILOGUES[v.name].get("out_dtype", "float32") for v in vs}
    data = {d: MatmulCheck(SHAPE, "float16", False, "float64", out_dtype=d) for d in set(out.values())}
    blas = {d: baselines.event_rounds(*baselines.cublas_call(*SHAPE, "float16", out_dtype=d)) for d in data}
    return beside_cublas(vs, lambda v: data[out[v.name]], lambda v: blas[out[v.name]], 1e-3,
                         f"{helpers.local_gpu_spec().name}, fp16 A and B {N}^3; cuBLAS writing C in the kernel's type")


def repro(_args) -> int:
    """CUTLASS fences its accumulators (`warpgroup_fence_operand`: an empty asm that reads and
    writes the register) so that the compiler keeps their other uses on their side of wgmma.fence
    and wait_group. TIRx 0.27 has the intrinsic, `T.cuda.wgmma.noop_barrier(reg)`, but its code
    generator reads `reg.dtype`, which a register load (TensorLoad) does not have, so the kernels
    go without: nvcc cannot move a global store of an accumulator above `wgmma.wait_group`, an
    asm statement that clobbers memory, and ptxas tracks wgmma's registers itself. Notebook 07's
    cell defining `fenced` is the smallest function that shows it; run, it prints what happens."""
    notebook_code("07_hopper_wgmma_tma", "def fenced(")
    return 0


STUDIES = {
    "wgmma": Study(wgmma, "wgmma fed by TMA, warp-specialized or not, at two block shapes", arguments=(ONLY,)),
    "epilogue": Study(epilogue, "the persistent kernel's C from registers or through shared memory and the TMA",
                      arguments=(ONLY,)),
    "repro": Study(repro, "what TIRx 0.27 cannot compile: wgmma.noop_barrier on an accumulator", needs=()),
}

if __name__ == "__main__":
    sys.exit(cli(__file__, __doc__, STUDIES))
