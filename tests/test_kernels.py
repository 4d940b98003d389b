import re

import numpy as np
import pytest
import tvm

import helpers
from helpers import kernels

from conftest import H100, VectorAdd, bound_vector_add, needs_gpu, needs_nvcc


def test_cuda_source_is_the_kernel_without_the_preamble(vector_add):
    src = helpers.cuda_source(vector_add)
    assert src.startswith('extern "C" __global__ void __launch_bounds__(128) main_kernel(')
    assert "blockIdx.x" in src and "threadIdx.x" in src
    assert "#include" not in src
    assert "#include" in helpers.cuda_source(vector_add, full=True)


def test_listing_does_not_depend_on_the_threads_alone():
    assert "__launch_bounds__(256)" in helpers.cuda_source(bound_vector_add(256))


def test_build_refuses_what_is_not_a_kernel():
    with pytest.raises(TypeError, match="expected a tvm.s_tir.Schedule, IRModule or PrimFunc, got str"):
        helpers.build("not a kernel")


def test_unbound_loops_make_no_gpu_kernel():
    # Without sch.bind TVM compiles the loop for the host: there is no CUDA to show.
    with pytest.raises(ValueError, match="no CUDA kernel was generated: no loop is bound"):
        helpers.cuda_source(VectorAdd)


@needs_nvcc
def test_ptx_and_ptxas_report(vector_add):
    ptx = helpers.ptx(vector_add)
    assert ".visible .entry main_kernel" in ptx and ".target sm_90" in ptx
    (report,) = helpers.ptxas_report(vector_add)
    assert report.kernel == "main_kernel" and report.arch == "sm_90"
    assert 4 <= report.registers <= 32 and report.spill_stores == 0
    assert "registers/thread" in str(report)


def test_occupancy_limited_by_registers():
    occ = helpers.occupancy(H100, threads_per_block=256, registers_per_thread=64)
    # 64 regs x 256 threads = 16384 per block: 65536 / 16384 = 4 blocks = 1024 threads = 50%
    assert occ.blocks_per_sm == 4 and occ.limited_by == "registers"
    assert occ.occupancy == pytest.approx(0.5)


def test_occupancy_limited_by_shared_memory():
    occ = helpers.occupancy(H100, threads_per_block=128, registers_per_thread=32, shared_bytes_per_block=96 * 1024)
    assert occ.blocks_per_sm == 2 and occ.limited_by == "shared memory"


def test_occupancy_full_for_a_light_kernel():
    occ = helpers.occupancy(H100, threads_per_block=256, registers_per_thread=16)
    assert occ.occupancy == 1.0 and occ.blocks_per_sm == 8
    assert occ.limited_by == "threads" and "shared memory" not in occ.limits


def test_occupancy_of_small_blocks_is_limited_by_the_block_count():
    occ = helpers.occupancy(H100, threads_per_block=32, registers_per_thread=16)
    assert occ.limited_by == "blocks" and occ.blocks_per_sm == 32 and occ.occupancy == 0.5


@pytest.mark.parametrize("kw, msg", [
    (dict(threads_per_block=0, registers_per_thread=32), "threads_per_block"),
    (dict(threads_per_block=2048, registers_per_thread=32), "threads_per_block"),
    (dict(threads_per_block=128, registers_per_thread=300), "registers_per_thread"),
    (dict(threads_per_block=128, registers_per_thread=32, shared_bytes_per_block=-1), "shared_bytes_per_block"),
])
def test_occupancy_bad_input(kw, msg):
    with pytest.raises(ValueError, match=msg):
        helpers.occupancy(H100, **kw)


def test_tile_factor_that_does_not_divide_is_refused():
    helpers.require_divides(4096, 128)
    with pytest.raises(ValueError, match=r"tile factor 64 does not divide the extent 1000 .*pad the shape to 1024"):
        helpers.require_divides(1000, 64)
    with pytest.raises(ValueError, match="must be positive"):
        helpers.require_divides(1000, 0)


@needs_gpu
def test_runs_on_the_gpu(vector_add, vector_add_args):
    args, expected = vector_add_args
    out = helpers.run(vector_add, args)
    assert helpers.relative_error(out, expected) < 1e-6


def test_unrolled_lines_fold_into_one():
    text = "\n".join(["float acc[4];"] + [f"  acc[{i}] = acc[{i}] + a[{i}] * b;" for i in range(4)] + ["}"])
    assert kernels.fold_repeated_lines(text).splitlines() == [
        "float acc[4];", "  acc[0] = acc[0] + a[0] * b;  // ... and 3 more like it", "}"]
    # at most `lines` lines, the count of those left out included
    assert kernels.fold_repeated_lines(text, lines=2).splitlines() == ["float acc[4];", "// ... (2 more lines)"]


def test_listings_fit_a_slide():
    short, medium, huge = "x = 1", "  y = " + " + ".join(["a"] * 50), "  z = " + "b" * 300
    lines = kernels.fit_listing("\n".join([short, medium, huge]), width=120).splitlines()
    assert lines[0] == short and all(len(line) <= 120 for line in lines)
    assert lines[1] + " " + lines[2].strip() == medium and lines[2].startswith("      + a")  # wrapped once, indented
    assert lines[3:] == ["  z =", "      " + "b" * 110 + " ..."]  # too long for two lines: cut
    many = kernels.fit_listing("\n".join(f"line {i}" for i in range(100)), lines=40, comment="#").splitlines()
    assert len(many) == 40 and many[-1] == "# ... (61 more lines)" and many[-2] == "line 38"


def test_a_long_line_wraps_as_often_as_asked():
    statement = "  B[i] = " + " + ".join(f"A[i + {k}]" for k in range(30))  # about 370 characters
    once = kernels.fit_listing(statement).splitlines()
    assert len(once) == 2 and once[1].endswith(" ...")  # the default: wrapped once, then cut
    whole = kernels.fit_listing(statement, wraps=3).splitlines()
    assert len(whole) == 4 and all(len(line) <= 120 for line in whole)
    assert whole[0] == once[0] and all(line.startswith("      ") for line in whole[1:])
    assert " ".join(line.strip() for line in whole) == statement.strip()  # nothing lost, nothing cut


def test_an_excerpt_shows_the_named_lines_and_counts_the_rest():
    kernel = "\n".join(["void k() {", "  int a = 0;", "  int b = 1;", "  for (int i = 0; i < 4; ++i) {",
                        "    wmma::mma_sync(c, a, b, c);", "    int d = 2;", "  }", "  wmma::store(c);", "}"])
    assert kernels.excerpt(kernel, r"wmma::").splitlines() == [
        "// ... (4 lines)", "    wmma::mma_sync(c, a, b, c);", "    // ... (2 lines)", "  wmma::store(c);", "// ... (1 line)"]
    assert kernels.excerpt(kernel, r"mma_sync", context=1).splitlines() == [
        "// ... (3 lines)", "  for (int i = 0; i < 4; ++i) {", "    wmma::mma_sync(c, a, b, c);", "    int d = 2;",
        "  // ... (3 lines)"]
    assert kernels.excerpt(kernel, r"void|\{|\}", context=9) == kernel  # every line kept: no marker
    assert kernels.excerpt(kernel, r"int", lines=3).splitlines()[-1] == "// ... (5 more lines)"  # then fit_listing


def test_tensorir_listing_indents_by_two(vector_add):
    listing = kernels.tir_listing(vector_add)
    full = vector_add.mod.script() if hasattr(vector_add, "mod") else vector_add.script()
    assert "\n  @T.prim_func" in listing and "\n    @T.prim_func" in full
    assert len(listing.splitlines()) <= 40 and max(map(len, listing.splitlines())) <= 120


def test_cuda_listing_is_the_kernel_shortened_never_changed():
    sch = tvm.s_tir.Schedule(VectorAdd)
    (i,) = sch.get_loops(sch.get_sblock("C"))
    bx, tx, k = sch.split(i, [None, 128, 8])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    sch.unroll(k)  # eight additions: a long kernel
    source = helpers.cuda_source(sch).splitlines()
    listing = helpers.cuda_listing(sch).splitlines()
    assert source[0].startswith(listing[0]) and "__global__" in listing[0]
    assert len(listing) <= 40 and max(map(len, listing)) <= 120  # fits a slide: long lines wrap
    # each line shown is a piece of the kernel, in order (a wrapped line shows in two pieces, a cut
    # one ends in " ...", a folded run shows its first line and a count)
    rest = " ".join(" ".join(source).split())
    for line in listing:
        piece = " ".join(re.sub(r"(  // \.\.\. and \d+ more like it| \.\.\.)$", "", line).split())
        found = rest.find(piece)
        assert found >= 0, f"the listing shows {line!r}, which the kernel does not have (or not in this order)"
        rest = rest[found + len(piece):]
    short = helpers.cuda_listing(sch, lines=3).splitlines()
    # three lines in all, the note counting the rest among them
    assert short[:2] == listing[:2] and re.fullmatch(r"// \.\.\. \(\d+ more lines\)", short[2]) and len(short) == 3


def test_tir_diff_shows_only_what_a_step_changed():
    from tvm.script import tirx as T

    @T.prim_func(s_tir=True)
    def add_one(A: T.Buffer((1024,), "float32"), B: T.Buffer((1024,), "float32")):
        for i in range(1024):
            with T.sblock("B"):
                vi = T.axis.spatial(1024, i)
                B[vi] = A[vi] + T.float32(1)

    before = tvm.s_tir.Schedule(add_one)
    after = before.copy()
    outer, inner = after.split(after.get_loops(after.get_sblock("B"))[0], [None, 128])
    after.bind(outer, "blockIdx.x")
    after.bind(inner, "threadIdx.x")
    diff = helpers.tir_diff(before, after).splitlines()
    assert "-     for i in range(1024):" in diff
    assert '+     for i_0 in T.thread_binding(8, thread="blockIdx.x"):' in diff
    assert diff[0].lstrip().startswith("# ... (") and "@I.ir_module" not in "\n".join(diff)
    assert all(line[:2] in ("- ", "+ ", "  ") for line in diff)
    assert helpers.tir_diff(after, after) == "# (no change)"


def _scale(x):
    """Docstrings are left out of a step's diff."""
    y = x * 2  # a comment at the end of a line stays: it is on a line of code
    # a line that is only a comment is left out
    return y


def _scale_and_shift(x):
    """So is this one."""
    y = x * 2  # a comment at the end of a line stays: it is on a line of code
    return y + 1


def test_source_diff_shows_a_step_s_code_without_docstrings_or_comment_lines():
    diff = helpers.source_diff(_scale, _scale_and_shift).splitlines()
    assert diff == ["- def _scale(x):", "+ def _scale_and_shift(x):", "      # ... (1 line)",
                    "-     return y", "+     return y + 1"], diff
    both = helpers.source_diff([_scale], [_scale, _scale_and_shift]).splitlines()
    assert both[-1] == "+     return y + 1" and "+ def _scale_and_shift(x):" in both and "- def _scale(x):" not in both
    assert helpers.source_diff(_scale, _scale) == "# (no change)"
