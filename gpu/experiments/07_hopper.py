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

  ladder  notebook 07's ladder: one tile of wgmma on tiles the threads load, checked against float64;
          a lone TMA copy, its box checked; then at 4096^3 the whole-matmul steps (wgmma on plain
          loads, TMA with one stage, the ring, warp specialization), each checked and timed in rounds
          alternating with cuBLAS writing fp32 C
  wgmma   every variant built for sm_90a; on the GPU each is checked against float64 and timed
          beside cuBLAS fp16 in the same run. --dry prints, per variant, the build time, the CUDA's
          length and, from the machine code (needs cuobjdump and nvdisasm), its HGMMA and UTMALDG
          instructions, registers per thread and local-memory (spill) instructions
  epilogue  the persistent kernel (grouped order) writing C from its registers or through shared
          memory and the TMA, in fp32 and fp16: each checked against float64, then timed in rounds
          alternating with cuBLAS writing C in the same type
  cluster   notebook 08's cluster kernel: the two blocks of a pair compute tiles one above the other
          and share B's tile, each loading half of it into both (TMA multicast), beside the
          persistent kernel
  profile   the persistent kernel and the multicast pair under Nsight Compute side by side (stall
          reasons, pipes, memory): where the pair waits
  small   the searched kernel beside cuBLAS at the sizes below 4096^3: timed per call, launched back
          to back, and replayed from a CUDA graph; then both under Nsight Compute (grid, duration)
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
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


import numpy as np
import tvm
from tvm.script import tirx as T

import helpers
from helpers import baselines
from lesson_code import hopper
from ncu import NCU_MENTIONED, TENSOR_PIPE_ROWS, launch_checked, ncu_rows, profile_side_by_side
from study import Study, cli, one_of, table
from variants import MatmulCheck, ONLY, Variant, beside_cublas, dry_run, fp16_matmuls_beside_cublas

N = 4096
SHAPE = (N, N, N)

NOTEBOOK = hopper()  # notebook 07's kernels (VARIANTS: name -> block_n, stages, specialized) and 08's
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


# ------------------------------------------------------------------ 2-block clusters, B multicast

# The exploration's own cluster kernel (no multicast, and arrivals released at the cluster's scope, as
# options) is deleted: its logs name the commit that ran it (07_hopper.cluster.txt, .half-the-blocks.txt,
# .profile.txt), and notes/07_08_hopper_wgmma_tma_persistent_kernel.md says what each showed.
CLUSTERED = {  # name: (kernel factory, its arguments besides the shape and the number of blocks)
    "persistent, fp32 C by TMA store": (NOTEBOOK.persistent_matmul_tma_store, dict()),
    "notebook 08: 2-block clusters, B multicast, fp32 C by TMA store": (NOTEBOOK.cluster_matmul, dict()),
    "notebook 08: 2-block clusters, B multicast, groups of 4, fp32 C by TMA store": (NOTEBOOK.cluster_matmul,
                                                                                     dict(group=4)),
    "persistent, fp16 C by TMA store": (NOTEBOOK.persistent_matmul_tma_store, dict(out_dtype="float16")),
    "notebook 08: 2-block clusters, B multicast, fp16 C by TMA store": (NOTEBOOK.cluster_matmul,
                                                                       dict(out_dtype="float16")),
    "notebook 08: 2-block clusters, B multicast, groups of 4, fp16 C by TMA store": (
        NOTEBOOK.cluster_matmul, dict(out_dtype="float16", group=4)),
}


# ------------------------------------------------------------------ the studies

BM, BK = NOTEBOOK.BM, NOTEBOOK.BK  # a block's rows of C, and its k step

# Notebook 07's ladder at 4096^3 with fp32 C: each step a few lines more than the one before.
LADDER = {
    "wgmma, plain loads, 128x256": lambda: NOTEBOOK.wgmma_matmul(N, N, N),
    "wgmma + TMA, one stage, 128x256": lambda: NOTEBOOK.tma_matmul(N, N, N),
    "wgmma + TMA, one role, 128x256, 4 stages": lambda: NOTEBOOK.hopper_matmul(N, N, N, 256, 4, False),
    "wgmma + TMA, specialized, 128x256, 4 stages": lambda: NOTEBOOK.hopper_matmul(N, N, N),
}
PIECES = {  # the ladder's two small pieces, checked on their own
    "one tile of wgmma_matmul (128x256x64)": lambda: NOTEBOOK.wgmma_matmul(BM, 256, BK),
    "the lone TMA copy (box at 128, 64)": lambda: NOTEBOOK.tma_copy(N, N, 128, 64),
}


def pieces_checked() -> int:
    """On the GPU: one tile of wgmma_matmul against float64, and the lone TMA copy's box against A's."""
    rng = np.random.default_rng(0)
    a, b = (rng.uniform(-1, 1, (N, N)).astype("float16") for _ in range(2))
    dev = helpers.device()
    tile, copy = (helpers.build(make(), "sm_90a", tir_pipeline="tirx") for make in PIECES.values())
    args = [tvm.runtime.tensor(np.ascontiguousarray(x), dev) for x in (a[:BM, :BK], b[:BK, :256],
                                                                        np.full((BM, 256), np.nan, "float32"))]
    tile.mod["main"](*args)
    ref = a[:BM, :BK].astype("float64") @ b[:BK, :256].astype("float64")
    err = float(np.linalg.norm(args[2].numpy() - ref) / np.linalg.norm(ref))
    box = tvm.runtime.tensor(np.zeros((BM, BK), "float16"), dev)
    copy.mod["main"](tvm.runtime.tensor(a, dev), box)
    same = bool(np.array_equal(box.numpy(), a[128:256, 64:128]))
    names = list(PIECES)
    print(f"{names[0]}: relative error {err:.1e} against float64 ({'right' if err < 1e-3 else 'WRONG'})")
    print(f"{names[1]}: the box {'equals' if same else 'DIFFERS from'} A[128:256, 64:128]", flush=True)
    return 0 if err < 1e-3 and same else 1


def ladder(args) -> int:
    """The ladder's pieces checked, then every step at 4096^3 checked against float64 and timed in
    rounds alternating with cuBLAS writing fp32 C."""
    vs = [Variant(name, make, SHAPE, {}, "tirx", "sm_90a") for name, make in LADDER.items()]
    if args.dry:
        pieces = [Variant(name, make, (), {}, "tirx", "sm_90a") for name, make in PIECES.items()]
        return dry_run(pieces + vs, lambda v, source: str(sass_of(source)))
    status = pieces_checked()
    data = MatmulCheck(SHAPE, "float16", False, "float64", out_dtype="float32")
    blas = baselines.event_rounds(*baselines.cublas_call(*SHAPE, "float16", out_dtype="float32"))
    return status | beside_cublas(vs, lambda v: data, lambda v: blas, 1e-3,
                                  f"{helpers.local_gpu_spec().name}, fp16 A and B {N}^3, fp32 C; notebook 07's ladder")



def wgmma(args) -> int:
    vs = [v for v in variants() if not args.only or args.only in v.name]
    if not vs:
        print(f"no variant's name contains {args.only!r}: {', '.join(KERNELS)}", file=sys.stderr)
        return 2
    return dry_run(vs, shared_and_sass) if args.dry else fp16_matmuls_beside_cublas(vs, N)


EPILOGUES = {  # name: (step 2's or step 3's kernel, its arguments besides the shape and the number of blocks)
    "persistent, fp32 C from registers": ("persistent_matmul", dict()),
    "persistent, fp32 C through shared + TMA": ("persistent_matmul_tma_store", dict()),
    "persistent, fp16 C from registers": ("persistent_matmul", dict(out_dtype="float16")),
    "persistent, fp16 C through shared + TMA": ("persistent_matmul_tma_store", dict(out_dtype="float16")),
    "persistent, fp16 C through shared + TMA, 3 stages": ("persistent_matmul_tma_store",
                                                          dict(out_dtype="float16", stages=3)),
    "persistent, fp16 C through shared + TMA, groups of 16": ("persistent_matmul_tma_store",
                                                              dict(out_dtype="float16", group=16)),
    "persistent, 128x128, 6 stages, fp16 C through shared + TMA": ("persistent_matmul_tma_store",
                                                                   dict(out_dtype="float16", block_n=128, stages=6)),
}


def one_per_sm(dry: bool) -> int:
    """The persistent kernels' block count: this GPU's SMs; an H100's 132 to build without one."""
    return 132 if dry else helpers.local_gpu_spec().sm_count


def persistent_variant(name: str, make, kw: dict, ctas: int, shape=SHAPE) -> Variant:
    """`make` (persistent_matmul or cluster_matmul) at `shape` with `ctas` blocks, built for sm_90a."""
    return Variant(name, functools.partial(make, *shape, ctas, **kw), shape, {}, "tirx", "sm_90a")


def beside_cublas_by_c_type(args, kernels: dict) -> int:
    """`kernels` (name: (factory, arguments)) at 4096^3 with one block per SM, each checked against
    float64, then timed in rounds alternating with cuBLAS writing C in the kernel's type."""
    vs = [persistent_variant(name, make, kw, one_per_sm(args.dry))
          for name, (make, kw) in kernels.items() if not args.only or args.only in name]
    out = {name: kw.get("out_dtype", "float32") for name, (_, kw) in kernels.items()}
    if args.dry:
        return dry_run(vs, lambda v, _: f"C in {out[v.name]}")
    data = {d: MatmulCheck(SHAPE, "float16", False, "float64", out_dtype=d) for d in {out[v.name] for v in vs}}
    blas = {d: baselines.event_rounds(*baselines.cublas_call(*SHAPE, "float16", out_dtype=d)) for d in data}
    return beside_cublas(vs, lambda v: data[out[v.name]], lambda v: blas[out[v.name]], 1e-3,
                         f"{helpers.local_gpu_spec().name}, fp16 A and B {N}^3; cuBLAS writing C in the kernel's type")


def epilogue(args) -> int:
    return beside_cublas_by_c_type(args, {name: (getattr(NOTEBOOK, step), kw) for name, (step, kw) in EPILOGUES.items()})


def cluster(args) -> int:
    return beside_cublas_by_c_type(args, CLUSTERED)


# Where a pair with B multicast waits: notebook 08's persistent kernel and its cluster kernel under Nsight Compute.
PAIRS = {  # short name: (factory, arguments besides the shape and the number of blocks), fp32 C
    "persistent": (NOTEBOOK.persistent_matmul_tma_store, dict()),
    "multicast": (NOTEBOOK.cluster_matmul, dict()),
}


# Why the small problems stay below cuBLAS: the searched kernel and cuBLAS at each size below 4096^3.
SMALL = [(512, 512, 512), (1024, 1024, 1024), (1024, 512, 2048), (2048, 2048, 2048)]


def searched(shape, gpu: str | None) -> dict:
    """The committed search's fastest configuration at `shape` (for `gpu`, else the recorded GPU), naming
    the step's kernel (`kernel`) as notebook 08's hopper_kernel takes it."""
    db = helpers.committed_database("hopper_persistent", gpu)
    return helpers.persistent.step_config(helpers.best_configuration(db, helpers.matmul_workload(*shape, "float16", "float32")))


def small_variant(shape, dry: bool) -> Variant:
    config = searched(shape, None if dry else helpers.local_gpu_spec().name)
    return persistent_variant(f"searched {'x'.join(map(str, shape))} ({helpers.format_config(config)})",
                              NOTEBOOK.hopper_kernel, config, one_per_sm(dry), shape)


def host_us(f, args, calls: int = 2000) -> float:
    """Microseconds per call that the host needs to launch `f` back to back (waiting only at the end)."""
    helpers.device().sync()
    start = time.perf_counter()
    for _ in range(calls):
        f(*args)
    helpers.device().sync()
    return (time.perf_counter() - start) / calls * 1e6


def small(args) -> int:
    """At each size of SMALL, the searched kernel timed three ways beside cuBLAS (fp32 C): per call
    as TVM's timer does, host launches back to back, and replayed from a CUDA graph as the notebook
    times cuBLAS at these sizes; then both kernels under Nsight Compute (grid, duration, pipes)."""
    vs = [small_variant(shape, args.dry) for shape in SMALL]
    if args.dry:
        return dry_run(vs)
    rows = [["kernel", "TVM timer us", "host launch us", "graph us", "cuBLAS graph us", "cuBLAS eager us",
             "% cuBLAS (graphs)"]]
    for v in vs:
        _, ex = v.build()
        data = MatmulCheck(v.shape, "float16", False, "float64")
        _, err = data.run(ex)
        call = baselines.cublas_call(*v.shape, "float16", out_dtype="float32")
        timers = {"tvm": lambda: helpers.time_function(ex.mod, data.dev, data.args, repeat=1)[0],
                  "graph": baselines.graph_rounds(baselines.on_torch_stream(ex.mod["main"], data.dev, data.args)),
                  "blas graph": baselines.graph_rounds(call[0]), "blas eager": baselines.event_rounds(*call)}
        times = {name: [] for name in timers}
        for _ in range(15):  # alternating rounds, so that all four see the same clocks
            for name, one_round in timers.items():
                times[name].append(one_round())
        us = {name: statistics.median(t) * 1e3 for name, t in times.items()}
        ratio = statistics.median(b / k for k, b in zip(times["graph"], times["blas graph"]))
        rows.append([f"{v.name}, rel err {err:.1e}", f"{us['tvm']:.2f}", f"{host_us(ex.mod['main'], data.args):.2f}",
                     f"{us['graph']:.2f}", f"{us['blas graph']:.2f}", f"{us['blas eager']:.2f}", f"{ratio:.1%}"])
        print(" | ".join(rows[-1]), flush=True)
    print()
    table(rows, f"{helpers.local_gpu_spec().name}: the searched kernel and cuBLAS (fp16 A and B, fp32 C), "
          "microseconds per call, median of 15 alternating rounds")
    status = 0
    for shape in SMALL:
        size = "x".join(map(str, shape))
        status |= profile_side_by_side(__file__, ["searched", "cublas"], ncu_rows(2.0 * np.prod(shape), TENSOR_PIPE_ROWS),
                                       f"{size} fp16, fp32 C", ("duration", "launch__", "sm__throughput", "tensor"),
                                       ("--shape", size))
    return status


def launch(args) -> int:
    """Launch one kernel of PAIRS (or cuBLAS, or the searched kernel) 4 times at --shape (ncu
    profiles the third); check its first 256 rows against float64."""
    shape = tuple(int(x) for x in args.shape.split("x"))
    rng = np.random.default_rng(0)
    a, b = rng.uniform(-1, 1, shape[::2]).astype("float16"), rng.uniform(-1, 1, shape[:0:-1]).astype("float16")
    if args.kernel == "cublas":
        variant = None
    elif args.kernel == "searched":
        variant = small_variant(shape, False)
    else:
        variant = persistent_variant(args.kernel, *PAIRS[args.kernel], one_per_sm(False), shape)
    return launch_checked(args.kernel, a, b, variant, "float32")


def profile(args) -> int:
    """Notebook 08's persistent kernel and its 2-block clusters with B multicast, side by side under
    Nsight Compute at the clocks timing runs see, with the stalls that say where each waits."""
    if args.dry:
        return dry_run([persistent_variant(name, *PAIRS[name], one_per_sm(True)) for name in PAIRS])
    return profile_side_by_side(__file__, list(PAIRS), ncu_rows(2.0 * N**3, TENSOR_PIPE_ROWS), f"{N}^3 fp16, fp32 C by TMA store",
                                ("tensor", "gmma", "cluster", *NCU_MENTIONED))


def repro(_args) -> int:
    """CUTLASS fences its accumulators (`warpgroup_fence_operand`: an empty asm that reads and
    writes the register) so that the compiler keeps their other uses on their side of wgmma.fence
    and wait_group. TIRx 0.27 has the intrinsic, `T.cuda.wgmma.noop_barrier(reg)`, but its code
    generator reads `reg.dtype`, which a register load (TensorLoad) does not have, so the kernels
    go without: nvcc cannot move a global store of an accumulator above `wgmma.wait_group`, an
    asm statement that clobbers memory, and ptxas tracks wgmma's registers itself. Notebook 07's
    `fenced` below (once a cell of notebook 07) is the smallest function that shows it."""
    @T.prim_func
    def fenced(C: T.Buffer((128,), "float32")):
        T.device_entry()
        T.cta_id([1])
        tid = T.thread_id([128])
        acc = T.alloc_local((1,), "float32")
        acc[0] = T.float32(0)
        T.cuda.wgmma.noop_barrier(acc[0])
        C[tid] = acc[0]

    try:
        helpers.build(fenced, "sm_90a", tir_pipeline="tirx")
        print("T.cuda.wgmma.noop_barrier compiles with this TVM: the fence can go back into the kernel")
    except Exception as err:  # noqa: BLE001 (TVM's errors carry a long backtrace before their last line)
        print(f"{type(err).__name__}: {str(err).strip().splitlines()[-1]}")
    return 0


STUDIES = {
    "ladder": Study(ladder, "notebook 07's ladder: one wgmma tile, a lone TMA copy, then each step timed beside "
                            "cuBLAS"),
    "wgmma": Study(wgmma, "wgmma fed by TMA, warp-specialized or not, at two block shapes", arguments=(ONLY,)),
    "epilogue": Study(epilogue, "the persistent kernel's C from registers or through shared memory and the TMA",
                      arguments=(ONLY,)),
    "cluster": Study(cluster, "2-block clusters sharing B by TMA multicast, beside the persistent kernel",
                     arguments=(ONLY,)),
    "profile": Study(profile, "Nsight Compute on notebook 08's persistent kernel and its clusters with B multicast",
                     needs=("ncu",)),
    "small": Study(small, "the searched kernel beside cuBLAS below 4096^3: timed three ways, then under Nsight Compute",
                   needs=("torch", "ncu")),
    "launch": Study(launch, "(run by profile and small under ncu) build, check and launch one kernel", dry=False,
                    needs=("torch",), logged=False,
                    arguments=((("kernel",), dict(type=one_of([*PAIRS, "cublas", "searched"]))),
                               (("--shape",), dict(default=f"{N}x{N}x{N}", help="MxNxK")))),
    "repro": Study(repro, "what TIRx 0.27 cannot compile: wgmma.noop_barrier on an accumulator", needs=()),
}

if __name__ == "__main__":
    sys.exit(cli(__file__, __doc__, STUDIES))
