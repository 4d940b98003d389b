"""What notebook 05 (tensor cores through tensorize) needs beside its schedules: whether this machine
can run them, the check-then-time call every step makes, the two tensor intrinsics that repeat the
pattern the notebook writes out (zeroing an accumulator, storing it), the sweep log and the table
across sizes, and the checks of its exercises.

The schedules stay in the notebook (they are the lesson); this holds what a student need not read.
"""

import re

import numpy as np
import tvm
from tvm.script import tirx as T

from . import kernels, records
from .bench import Measurement, run
from .env import listing_target, require_tensor_cores


def tensor_cores(nb) -> bool:
    """Whether this GPU (or the recorded one) has tensor cores; says what runs here and what is shown."""
    if nb.spec is None:
        here = False
        print("No GPU and no recorded results: the kernels below are built and read, not run.")
    else:
        try:
            require_tensor_cores(nb.spec)
            here = True
        except RuntimeError as err:  # a GPU older than Volta
            here = False
            print(err)
    if not (nb.live and here):
        print("Every kernel below is still tensorized and built (its CUDA shows the wmma calls);\n"
              "the timings shown are the recorded ones.")
    return here


def measurer(nb, tensor_cores: bool, args, reference, flops: float, bytes: float, tol: float, baseline):
    """The notebook's `measure(name, sch, **params)`: check `sch` against the float64 reference, then
    time it in rounds alternating with `baseline` (cuBLAS), cp.async allowed (section 11); on a GPU
    without tensor cores, build it and show the record instead."""

    def measure(name, sch, **params):
        if nb.live and not tensor_cores:
            kernels.build(sch, listing_target())
            m = nb.recorded_or_live(name)
            if m is not None:
                nb.results.append(m)
            print(m or f"{name}: not run (no tensor cores here) and no recorded result")
            return m
        with tvm.transform.PassContext(config={"tirx.use_async_copy": True}):
            return nb.measure(name, sch, args, reference, flops=flops, bytes=bytes, tol=tol, repeat=10,
                              params=params, baseline=baseline)

    return measure


def fill_and_store(frag_index) -> dict:
    """The intrinsics for zeroing an accumulator fragment (fill_fragment) and storing it to C in global
    memory (store_matrix_sync), as (description, implementation) pairs: the pattern of the notebook's
    loads and mma_sync, with its `frag_index`."""

    @T.prim_func(s_tir=True)
    def wmma_fill_desc(c: T.handle):
        C = T.match_buffer(c, (16, 16), "float32", align=64, offset_factor=16, scope="wmma.accumulator")
        with T.sblock("root"):
            T.reads()
            T.writes(C[0:16, 0:16])
            for i, j in T.grid(16, 16):
                with T.sblock("init"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    C[vi, vj] = T.float32(0)

    @T.prim_func(s_tir=True)
    def wmma_fill_impl(c: T.handle):
        c1, c0 = T.int32(), T.int32()
        C = T.match_buffer(c, (16, 16), "float32", align=64, offset_factor=16, scope="wmma.accumulator",
                           strides=[c1, c0])
        with T.sblock("root"):
            T.reads()
            T.writes(C[0:16, 0:16])
            T.tvm_fill_fragment(C.data, 16, 16, 16, frag_index(C, c1), T.float32(0), dtype="void")

    @T.prim_func(s_tir=True)
    def wmma_store_desc(a: T.handle, c: T.handle):
        A = T.match_buffer(a, (16, 16), "float32", align=64, offset_factor=16, scope="wmma.accumulator")
        C = T.match_buffer(c, (16, 16), "float32", align=64, offset_factor=16, scope="global")
        with T.sblock("root"):
            T.reads(A[0:16, 0:16])
            T.writes(C[0:16, 0:16])
            for i, j in T.grid(16, 16):
                with T.sblock("store"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    C[vi, vj] = A[vi, vj]

    @T.prim_func(s_tir=True)
    def wmma_store_impl(a: T.handle, c: T.handle):
        a1, a0, s1, s0 = T.int32(), T.int32(), T.int32(), T.int32()
        A = T.match_buffer(a, (16, 16), "float32", align=64, offset_factor=16, scope="wmma.accumulator",
                           strides=[a1, a0])
        C = T.match_buffer(c, (16, 16), "float32", align=64, offset_factor=16, scope="global", strides=[s1, s0])
        with T.sblock("root"):
            T.reads(A[0:16, 0:16])
            T.writes(C[0:16, 0:16])
            T.tvm_store_matrix_sync(A.data, 16, 16, 16, frag_index(A, a1), C.access_ptr("w"), s1, "row_major",
                                    dtype="void")

    return dict(init=(wmma_fill_desc, wmma_fill_impl), store=(wmma_store_desc, wmma_store_impl))


def pipeline_sweep(pattern: str = r"(2x2|2x4|4x2) warps of 4x4, k64, 3 st early-frag.*:") -> str:
    """Section 10.1's rows of the committed sweep `05_tensor_cores.py pipeline`: its GPU, date and TVM
    version, then the layouts' lines up to their error column."""
    log = (records.EXPERIMENTS_DIR / "05_tensor_cores.pipeline.txt").read_text().splitlines()
    lines = [log[0].lstrip("# ").split(";")[0]]
    lines += ["  " + line.split("  err")[0] for line in log if re.match(pattern, line)]
    return "\n".join(lines)


def fit(nb, tiles: dict, stages: int, shortest: int, notes: list, shared_bytes) -> tuple:
    """The tiles and shared scope a step runs with on this GPU: `tiles` if their `stages` fit its shared
    memory per block (T4: 64 KB, L4: 99 KB), else a shorter k tile (not below `shortest` fragments), then
    a 128 x 128 block tile; says what changed (`nb.fits`) and notes it. Over 48 KB the scope is dynamic."""
    need, here = shared_bytes(tiles, stages), dict(tiles)
    limit = nb.spec.max_shared_memory_per_block if nb.spec else need
    while shared_bytes(here, stages) > limit and here["k_tile"] > shortest:
        here["k_tile"] //= 2
    here["warps"] = (2, 2) if shared_bytes(here, stages) > limit else here["warps"]
    if here != tiles:
        block = "a 128 x 128 block tile and " if here["warps"] != tiles["warps"] else ""
        nb.fits(need, f"with {block}a k tile of {16 * here['k_tile']}")
        notes.append(f"{'128 x 128 block, ' if block else ''}k{16 * here['k_tile']}")
    return here, "shared.dyn" if shared_bytes(here, stages) > 48 * 1024 else "shared"


def at_size(nb, shape, schedule, tensor_cores: bool, tol: float) -> tuple:
    """(the final kernel, cuBLAS) at one size: `schedule(M, N, K)` checked, then timed in rounds with
    cuBLAS writing fp32 C (a CUDA graph), on a GPU with tensor cores; elsewhere built, the records shown."""
    m_, n_, k_ = shape
    size = "x".join(map(str, shape))
    names = f"final kernel {size}", f"cuBLAS float16 {size}, fp32 C (CUDA graph)"
    with tvm.transform.PassContext(config={"tirx.use_async_copy": True}):
        sch = schedule(*shape)
        if not (nb.live and tensor_cores):
            kernels.build(sch, listing_target())  # it still builds at every size
            return tuple(nb.recorded_or_live(n) or Measurement(n, None, source="missing") for n in names)
        rng = np.random.default_rng(1)
        a, b = (rng.uniform(-1, 1, s).astype("float16") for s in ((m_, k_), (n_, k_)))
        blas = nb.cublas_matmul(*shape, "float16", transpose_b=True, out_dtype="float32", graph=True,
                                name=names[1], quiet=True)
        m = nb.measure(names[0], sch, [a, b, np.zeros((m_, n_), "float32")],
                       lambda: a.astype("float64") @ b.astype("float64").T, flops=2.0 * m_ * n_ * k_, tol=tol,
                       repeat=10, baseline=blas, quiet=True)
    return m, blas


def sizes_table(by_size: dict) -> str:
    """The final kernel and cuBLAS at each size: TFLOP/s, and the kernel as a share of cuBLAS."""
    lines = [f"{'size':>14s} {'kernel':>8s} {'cuBLAS':>8s}  TFLOP/s; kernel vs cuBLAS (fp32 C)"]
    for shape, (m, blas) in by_size.items():
        size = f"{shape[0]}³" if len(set(shape)) == 1 else "x".join(map(str, shape))
        rates = "".join(f"{x.tflops:>9.1f}" if x.ok else f"{'-':>9s}" for x in (m, blas))
        lines.append(f"{size:>14s}{rates}" + (f"  {m.of(blas):.0%}" if m.of(blas) else ""))
    return "\n".join(lines)


#: exercise 4's problem: one block row of 128 x 256 blocks, four k tiles of 64
PADDING_SHAPE = (256, 512, 256)


def check_padding(my_padded, tiles: dict, run_here: bool) -> str:
    """Exercise 4: the student's `my_padded(M, N, K, tiles)` must keep the tensorized kernel and give
    A's and B's shared rows a stride of 8 halves (one 16-byte unit) past a multiple of 16, so that the 8
    rows a wmma load reads start in 8 different groups of 4 banks; checked in the CUDA (the stride each
    load_matrix_sync is given), and on a GPU with tensor cores against NumPy."""
    M, N, K = PADDING_SHAPE
    sch = my_padded(M, N, K, tiles)
    if not isinstance(sch, tvm.s_tir.Schedule):
        return "not yet: my_padded must return its schedule"
    cuda = kernels.cuda_source(sch)
    if "wmma::mma_sync" not in cuda:
        return "not yet: the multiply is not tensorized (start from `tensorized`)"
    strides = dict(re.findall(r"load_matrix_sync\((\w)_shared\w*\[\w+\], .*, (\d+)\);", cuda))
    for operand in "AB":
        stride = int(strides.get(operand, 0))
        if stride % 16 != 8:
            return f"not yet: {operand}'s shared rows are {stride} halves apart: the 8 rows a wmma load reads share banks"
    if run_here:
        rng = np.random.default_rng(2)
        a, b = rng.uniform(-1, 1, (M, K)).astype("float16"), rng.uniform(-1, 1, (N, K)).astype("float16")
        out = run(sch, [a, b, np.zeros((M, N), "float32")])
        expected = a.astype("float64") @ b.astype("float64").T
        error = np.linalg.norm(out - expected) / np.linalg.norm(expected)
        if not error < 1e-3:
            return f"not yet: the padded kernel computes a wrong product (relative error {error:.1e})"
        return f"correct: rows {strides['A']} and {strides['B']} halves apart; on this GPU, relative error {error:.1e}"
    return f"correct: rows {strides['A']} and {strides['B']} halves apart, the multiply still on wmma"


def main_loop(sch, pattern: str) -> str:
    """The lines of the kernel's main loop (`for (int k_0_0 ...` to its closing brace) that match
    `pattern`: its copies, waits, fragment loads and multiplies, built with cp.async allowed."""
    with tvm.transform.PassContext(config={"tirx.use_async_copy": True}):
        lines = kernels.cuda_source(sch).splitlines()
    first = next(n for n, line in enumerate(lines) if line.startswith("  for (int k_0_0"))
    last = lines.index("  }", first)
    return kernels.excerpt("\n".join(lines[first:last + 1]), pattern)
