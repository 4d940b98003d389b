"""Notebook 08's persistent kernel as a ladder, and its tile-order exercise.

On the CPU: the tile orders are permutations of C's tiles, the order the kernel takes is the one it is
given (and the default one leaves the kernel's CUDA as it was), the exercise accepts its solution and
refuses wrong orders with a reason, and the ladder's kernels build for sm_90a. On a Hopper GPU: every
step of the ladder, and the kernel in the student's order, against NumPy."""

import numpy as np
import pytest
import tvm

import helpers
from test_exercises import run_exercise, solution

NB08 = "08_hopper_persistent_kernel"
START = ["helpers.start("]
ORDER = "def column_order(t, tiles_m, tiles_n, group):"
NO_RUN = "RUN = False"  # the cell checks on the CPU; on a GPU test_each_step_matches_numpy_on_a_hopper_gpu runs the order
SOLUTION = solution(NB08, "**Write a tile order.**")
SMALL = (1024, 1024, 128)  # the smallest problem that groups of 8 block rows of 128 x 256 tile


@pytest.fixture(scope="module")
def nb08():
    return helpers.lessons.lesson(NB08)


def column_order_from_solution():
    space = {}
    exec(SOLUTION, space)
    return space["column_order"]


def cuda_of(kernel) -> str:
    return helpers.build(kernel, "sm_90a", tir_pipeline="tirx").mod.imports[0].inspect_source()


@pytest.mark.parametrize("tiles_m, tiles_n, group", [(32, 16, 1), (32, 16, 8), (64, 32, 8), (8, 4, 2)])
def test_grouped_order_visits_every_tile_once(nb08, tiles_m, tiles_n, group):
    tiles = [nb08.grouped_order(t, tiles_m, tiles_n, group) for t in range(tiles_m * tiles_n)]
    assert sorted(tiles) == [(r, c) for r in range(tiles_m) for c in range(tiles_n)]
    if group == 1:  # row-major
        assert tiles == [(t // tiles_n, t % tiles_n) for t in range(tiles_m * tiles_n)]


def test_grouped_order_reads_fewer_operand_tiles_when_c_is_wide(nb08):
    """At 8192^3 in 128 x 256 tiles the first wave of 132 reads 8 + 17 operand tiles grouped, 5 + 32
    row-major (the excerpt step 2 prints)."""
    foot = helpers.persistent.wave_footprint
    assert foot(nb08.grouped_order, 64, 32, 132, 8) == (8, 17)
    assert foot(nb08.grouped_order, 64, 32, 132, 1) == (5, 32)


def test_the_default_order_is_grouped_order(nb08):
    default = cuda_of(nb08.persistent_matmul(*SMALL, 132))
    assert default == cuda_of(nb08.persistent_matmul(*SMALL, 132, order=nb08.grouped_order))
    assert default != cuda_of(nb08.persistent_matmul(*SMALL, 132, order=column_order_from_solution()))


def test_the_solution_is_a_column_band_order():
    order = column_order_from_solution()
    helpers.persistent.check_order(order, 32, 16, 4)
    helpers.persistent.check_order(order, 8, 64, 8)
    assert helpers.persistent.wave_footprint(order, 8, 64, 32, 8) == (4, 8)  # 4 rows x 8 columns


def test_the_exercise_with_its_solution(tmp_path, capsys):
    out = run_exercise(tmp_path, capsys, NB08, START, ORDER, SOLUTION, extra=NO_RUN)
    assert out.startswith("correct: every tile once"), out


WRONG = {
    "the rows' grouped order": ("    band, inner = t // (group * tiles_n), t % (group * tiles_n)\n"
                                "    return band * group + inner % group, inner // group\n", "walk along a row"),
    "band and inner swapped": ("    band, inner = t // (group * tiles_m), t % (group * tiles_m)\n"
                               "    return band * group + inner % group, inner // group\n", "not yet: "),
    "bands of rows, not columns": ("    band, inner = t // (group * tiles_m), t % (group * tiles_m)\n"
                                   "    return inner % tiles_m, band\n", "not yet: "),
    "every tile the first": ("    band, inner = 0, 0\n    return band, inner\n", "comes 512 times"),
    "not attempted": ("    band, inner = ..., ...\n    return ..., ...\n", "not yet: fill in band and inner"),
}


@pytest.mark.parametrize("wrong", WRONG)
def test_the_exercise_refuses_wrong_orders(tmp_path, capsys, wrong):
    body, says = WRONG[wrong]
    out = run_exercise(tmp_path, capsys, NB08, START, ORDER, ORDER + "\n" + body, extra=NO_RUN)
    assert out.startswith("not yet") and says in out, out


def test_the_source_diff_shows_only_the_change(nb08):
    diff = helpers.persistent.source_diff(nb08.consume_tiles, nb08.consume_pingpong)
    assert "+            T.cuda.mbarrier_wait(turn.ptr_to([wg]), (i - 1) // 2 % 2)" in diff
    assert "multiply_stage(As, Bs, top" in diff and "T.cuda.mbarrier_wait(full" not in diff


LADDER = {  # the notebook's steps at a small shape: persistent_matmul's or cluster_matmul's arguments
    "row-major": dict(group=1), "grouped": dict(group=8), "TMA store": dict(group=8, tma_store=True),
    "fp16 C": dict(group=8, out_dtype="float16"), "fp16 C, TMA store": dict(group=8, out_dtype="float16", tma_store=True),
    "ping-pong": dict(group=8, block_n=128, pingpong=True), "clusters": dict(cluster=True),
}


def ladder_kernel(nb08, shape, args):
    args = dict(args)
    if args.pop("cluster", False):
        return nb08.cluster_matmul(*shape, 132, group=4, **args)
    return nb08.persistent_matmul(*shape, 132, **args)


HOPPER = helpers.gpu_available() and helpers.device().compute_version.startswith("9")


@pytest.mark.skipif(not HOPPER, reason="runs the kernels on a Hopper GPU")
@pytest.mark.parametrize("step", [*LADDER, "column order"])
def test_each_step_matches_numpy_on_a_hopper_gpu(nb08, step):
    m, n, k = 2048, 2048, 512
    rng = np.random.default_rng(0)
    a, b = rng.uniform(-1, 1, (m, k)).astype("float16"), rng.uniform(-1, 1, (k, n)).astype("float16")
    if step == "column order":
        kernel, dtype = nb08.persistent_matmul(m, n, k, 132, group=4, order=column_order_from_solution()), "float32"
    else:
        kernel, dtype = ladder_kernel(nb08, (m, n, k), LADDER[step]), LADDER[step].get("out_dtype", "float32")
    ex, dev = helpers.build(kernel, "sm_90a", tir_pipeline="tirx"), helpers.device()
    args = [tvm.runtime.tensor(x, dev) for x in (a, b, np.full((m, n), np.nan, dtype))]  # C poisoned: all written?
    ex.mod["main"](*args)
    c = args[2].numpy()
    expected = a.astype("float64") @ b.astype("float64")
    assert np.abs(c.astype("float64") - expected).max() / np.abs(expected).max() < (2e-3 if dtype == "float16" else 1e-4)
