"""What notebook 07 (wgmma and TMA) shows beside its kernels: the profile it starts from, the Hopper
instructions of its final kernel, its results tables and chart, and the harness of its TMA exercise.

The kernels stay in the notebook (they are the lesson); this module holds what a student need not
read to follow it: table layout, listing, and the kernel around the student's own TMA copy, which
mirrors the notebook's `tma_copy` for a box of B.
"""

import numpy as np
import tvm
from tvm.script import tirx as T

from . import kernels, records
from .env import device

#: notebook 07's block rows and k step (BM, BK), and the TMA copy its kernels issue
BM, BK = 128, 64
TMA_LOAD = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
#: the exercise's problem: B is K x N; the box is k step 2 (rows 128..191), columns 192..255
EXERCISE_K, EXERCISE_N, EXERCISE_STEP, EXERCISE_COL = 512, 512, 2, 192
#: the Hopper instructions section 9 lists, in the order a k step meets them
HOPPER_WORDS = ("setmaxnreg.dec", "setmaxnreg.inc", "mbarrier.init", "mbarrier.arrive.expect_tx", "cp.async.bulk.tensor",
                "mbarrier.try_wait", "mbarrier.arrive.shared", "wgmma.fence", "wgmma.mma_async", "wgmma.commit_group",
                "wgmma.wait_group")


def check_tiles(M: int, N: int, K: int, rows: int, block_n: int, block_m: int = BM) -> None:
    """A clear error for a problem that the kernel's tiles do not divide (`rows` of C per block, or
    per group), or for a block the kernel cannot be (block_m rows: a consumer warpgroup per 64)."""
    if M % rows or N % block_n or K % BK or block_n % 64 or not 64 <= block_n <= 256 or block_m not in (64, 128):
        raise ValueError(f"{M}x{N}x{K} does not tile by {rows} x {block_n} x {BK} with blocks of {block_m} rows")


def profile_table() -> str:
    """Section 1's table: the Nsight Compute profile of five kernels (06_fp16.profile), its row of
    top stalls (too wide for a column) listed below the table, one line per kernel."""
    from . import plots  # matplotlib loads on first use

    _, title, rows = records.experiment_table("06_fp16.profile", "4096^3 fp16")
    stalls = next(row for row in rows if row[0].startswith("top stalls"))
    rows.remove(stalls)
    lines = [title, plots.text_table(rows)]
    lines += [f"{'top stalls of ' + kernel:20s}  {stall}" for kernel, stall in zip(rows[0][1:], stalls[1:])]
    return "\n".join(lines)


def hopper_instructions(cuda: str, words=HOPPER_WORDS) -> str:
    """The kernel's signature (its tensor maps) and the first use of each Hopper instruction in its
    generated CUDA, each printed from its name up to its ';' (the inline PTX around it is noise)."""
    lines = cuda.splitlines()
    shown = [kernels.fit_listing(next(line for line in lines if "CUtensorMap" in line).removesuffix(" {"))]
    for word in words:
        line = next(line for line in lines if word in line)
        shown.append(kernels.fit_listing(line[line.index(word):].split(";")[0]))
    return "\n".join(shown)


def results(runs: dict, like_for_like: str, cublas, cublas_fp32c):
    """Section 8's two tables (fp32 C against cuBLAS writing fp32; the fp16-C kernel against cuBLAS
    writing fp16) and, where every number exists, the chart of the fp32-C kernels against cuBLAS."""
    from . import plots

    fp32c = [m for m in runs.values() if m is not None and m.name != like_for_like]
    print(plots.table(fp32c + [cublas_fp32c], baseline=cublas_fp32c))
    print(plots.table([runs[like_for_like], cublas], baseline=cublas))
    shown = [m for m in fp32c if m.ok]
    if shown and cublas_fp32c is not None and cublas_fp32c.ok:
        return plots.versus_baseline(shown, cublas_fp32c, title="wgmma + TMA matmul, 4096^3, fp16 in, fp32 C")
    return None


def run_tile(tile, a: np.ndarray, b: np.ndarray) -> str:
    """Run the one-tile kernel (a block of 128 x N, one k step) on the GPU against the float64 product."""
    (m, k), n = a.shape, b.shape[1]
    args = [tvm.runtime.tensor(np.ascontiguousarray(x), device()) for x in (a, b, np.zeros((m, n), "float32"))]
    tile.mod["main"](*args)
    expected = a.astype("float64") @ b[:k].astype("float64")
    return f"one tile: relative error {np.linalg.norm(args[2].numpy() - expected) / np.linalg.norm(expected):.1e}"


def b_box_copy(K: int, N: int, k: int, col: int, load_b_box, tma_options):
    """The exercise's kernel, notebook 07's `tma_copy` for B: B's tensor map (N innermost, boxes of
    64 columns x BK rows, the 128-byte swizzle), a barrier that expects one arrival, the student's
    `load_b_box(B_map, Bs, bar, k, col)` on thread 0, a wait for phase 0, then 128 threads copy the box
    back out to `box` through the swizzle."""

    @T.prim_func
    def main(B: T.Buffer((K, N), "float16"), box: T.Buffer((BK, 64), "float16")):
        B_map: T.let[T.TensorMap()] = T.tvm_stack_alloca("tensormap", 1)  # on the host
        T.tensormap_encode_tiled(B_map, B.data, N, K, N * 2, 64, BK, 1, 1, **tma_options("float16"))
        T.device_entry()
        T.cta_id([1])
        tid = T.thread_id([128])
        pool = T.alloc_buffer((BK * 64 * 2 + 8,), "uint8", scope="shared.dyn", align=1024)
        Bs = T.decl_buffer((1, 1, BK, 64), "float16", data=pool.data, elem_offset=0, scope="shared.dyn")
        bar = T.decl_buffer((1,), "uint64", data=pool.data, elem_offset=BK * 64 * 2 // 8, scope="shared.dyn")
        if tid == 0:
            T.ptx.mbarrier.init.shared.b64(bar.ptr_to([0]), T.uint32(1))
            T.ptx.fence.mbarrier_init.release.cluster()
            load_b_box(B_map, Bs, bar, k, col)
        T.cuda.mbarrier_wait(bar.ptr_to([0]), 0)
        for i in T.unroll(BK * 8 // 128):
            r, u = T.meta_var((i * 128 + tid) // 8), T.meta_var(tid % 8)
            box[r, T.Ramp(u * 8, 1, 8)] = Bs[0, 0, r, T.Ramp((u ^ r % 8) * 8, 1, 8)]

    return main


def _calls(cuda: str, name: str) -> list[str]:
    """The arguments of every call of the generated helper whose name contains `name`, in the kernel body."""
    body = cuda[cuda.index('extern "C" __global__ void __launch_bounds__'):]
    body = body[body.index("{"):]
    return [line.strip().split("(", 1)[1] for line in body.splitlines() if name in line.split("(", 1)[0]]


def check_b_box(load_b_box, tma_options, run: bool) -> str:
    """Exercise 3: build the student's TMA copy of B's box into `b_box_copy` for sm_90a, read the
    generated CUDA (bytes expected on the barrier before the copy, the copy's coordinates innermost
    first), assemble it, and where `run` (a Hopper GPU) compare the box with NumPy's slice of B."""
    k, col = EXERCISE_STEP, EXERCISE_COL
    try:
        kernel = b_box_copy(EXERCISE_K, EXERCISE_N, k, col, load_b_box, tma_options)
        cuda = kernels.build(kernel, "sm_90a", tir_pipeline="tirx").mod.imports[0].inspect_source()
    except tvm.error.DiagnosticError as err:
        if "ellipsis" in str(err):
            return "not yet: fill in load_b_box (where the `...` is)"
        return f"not yet: load_b_box does not parse: {str(err).splitlines()[0]}"
    expects, copies = _calls(cuda, "expect_tx"), _calls(cuda, "cp_async_bulk_tensor")
    if len(copies) != 1:
        return f"not yet: one TMA copy ({TMA_LOAD.split('.mbarrier')[0]}) is needed, found {len(copies)}"
    if len(expects) != 1 or not expects[0].endswith(f"(uint){BK * 64 * 2});"):
        return (f"not yet: the barrier must expect the box's bytes once, before the copy "
                f"(mbarrier.arrive.expect_tx: {BK} rows x 64 halves x 2 bytes)")
    coords = copies[0].split("&(B_map)))), ")[1].split(", ")[:2]
    if coords != [str(col), str(k * BK)]:
        return (f"not yet: the copy asks for coordinates ({', '.join(coords)}): a tensor map's coordinates go "
                f"innermost first, in elements (B's column, then its row)")
    if kernels.device_code(cuda, "sm_90a") <= 0:
        return "not yet: the kernel does not assemble for sm_90a"
    if run:
        b = np.random.default_rng(3).uniform(-1, 1, (EXERCISE_K, EXERCISE_N)).astype("float16")
        dev = device()
        box = tvm.runtime.tensor(np.zeros((BK, 64), "float16"), dev)
        kernels.build(kernel, "sm_90a", tir_pipeline="tirx").mod["main"](tvm.runtime.tensor(b, dev), box)
        if not np.array_equal(box.numpy(), b[k * BK:(k + 1) * BK, col:col + 64]):
            return "not yet: the box that landed is not B's rows 128..191, columns 192..255"
        return "correct: the box is B[128:192, 192:256], checked on this GPU"
    return "correct: the copy of B[128:192, 192:256] builds and assembles for sm_90a"


def check_bytes(bytes_256, bytes_128) -> str:
    """Exercise 1: the bytes of A and B one k step copies for blocks of 128 x 256 and 128 x 128."""
    if bytes_256 == (BM * BK + BK * 256) * 2 and bytes_128 == (BM * BK + BK * 128) * 2:
        return f"correct: {BM * 256 * BK / bytes_256:.0f} versus {BM * 128 * BK / bytes_128:.0f} multiply-adds per byte"
    return "not yet: a k step copies a 128 x 64 tile of A and a 64 x block_n tile of B, 2 bytes per half"


def check_stages(answers: dict, limit: int, shared_bytes, hopper_matmul, shape=(4096, 4096, 4096)) -> str:
    """Exercise 2: for each block width (answers: block_n -> stages), the most stages whose shared memory
    fits `limit`; each answer's kernel is built for sm_90a and assembled."""
    if any(not isinstance(stages, int) for stages in answers.values()):  # an answer is still `...`
        return "not yet: find the largest number of stages whose shared_bytes fits the limit"
    for bn, stages in answers.items():
        if shared_bytes(bn, stages) > limit:
            return f"not yet: {stages} stages of 128 x {bn} do not fit"
        if shared_bytes(bn, stages + 1) <= limit:
            return f"not yet: more than {stages} stages of 128 x {bn} fit"
        cuda = kernels.build(hopper_matmul(*shape, bn, stages), "sm_90a", tir_pipeline="tirx").mod.imports[0]
        if kernels.device_code(cuda.inspect_source(), "sm_90a") <= 0:
            return f"not yet: {stages} stages of 128 x {bn} do not assemble for sm_90a"
    return f"correct: {' and '.join(str(s) for s in answers.values())} stages, both kernels assemble for sm_90a"
