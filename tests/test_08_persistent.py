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
    diff = helpers.source_diff(nb08.consume_tiles, nb08.consume_pingpong)
    assert "+             T.cuda.mbarrier_wait(turn.ptr_to([wg]), (i - 1) // 2 % 2)" in diff
    assert "multiply_stage(As, Bs, top" in diff and "T.cuda.mbarrier_wait(full" not in diff


LADDER = {  # the notebook's steps at a small shape: the step's kernel function and its arguments
    "row-major": ("persistent_matmul", dict(group=1)), "grouped": ("persistent_matmul", dict(group=8)),
    "TMA store": ("persistent_matmul_tma_store", dict(group=8)),
    "fp16 C": ("persistent_matmul", dict(group=8, out_dtype="float16")),
    "fp16 C, TMA store": ("persistent_matmul_tma_store", dict(group=8, out_dtype="float16")),
    "ping-pong": ("persistent_matmul_pingpong", dict(group=8, block_n=128)),
    "clusters": ("cluster_matmul", dict(group=4)),
}


def ladder_kernel(nb08, shape, step):
    name, args = LADDER[step]
    return getattr(nb08, name)(*shape, 132, **args)


def test_each_step_is_the_one_before_plus_its_change(nb08):
    """Steps 3 and 4 are persistent_matmul with consumers of their own: step 3's CUDA has the TMA store
    (s2g) and waits for its bulk stores, step 2's neither; step 4's sets up two more mbarriers (the
    consumers' turns) and waits on one more, and stores C from the registers as step 2 does."""
    grouped, tma, pingpong = (cuda_of(ladder_kernel(nb08, SMALL, s)) for s in ("grouped", "TMA store", "ping-pong"))
    assert "s2g" in tma and "bulk_wait_group" in tma
    assert "s2g" not in grouped + pingpong and "bulk_wait_group" not in grouped + pingpong
    assert pingpong.count("mbarrier_init") == grouped.count("mbarrier_init") + 2
    assert pingpong.count("mbarrier_wait") == grouped.count("mbarrier_wait") + 1


@pytest.mark.parametrize("make, args, says", [
    ("persistent_matmul_tma_store", dict(out_dtype="float16", block_n=64), "an even number of 128-byte chunks"),
    ("persistent_matmul_tma_store", dict(out_dtype="float16", block_n=192), "an even number of 128-byte chunks"),
    ("persistent_matmul_pingpong", dict(block_m=64, block_n=128), "ping-pong blocks of 128 rows"),
    ("persistent_matmul", dict(block_m=256), "with blocks of 256 rows")])
def test_each_step_refuses_what_it_cannot_do(nb08, make, args, says):
    with pytest.raises(ValueError, match=says):
        getattr(nb08, make)(1024, 1536, 128, 132, group=1, **args)  # 1536: 8 x 192


def test_the_search_picks_among_the_steps_kernels(nb08):
    """Section 2's space names each step's kernel function; the committed searches' flags translate to them."""
    space = helpers.persistent.hopper_space(4096, 4096, 4096, 132, 227 * 1024)
    assert {c["kernel"] for c in space} == set(helpers.persistent.STEP_KERNELS)
    assert all(callable(getattr(nb08, name)) for name in helpers.persistent.STEP_KERNELS)
    assert not any(c["kernel"] == "persistent_matmul_pingpong" and c["block_n"] > 128 for c in space)
    step = helpers.persistent.step_config
    assert step(dict(block_n=256, pingpong=False, tma_store=True)) == dict(block_n=256, kernel="persistent_matmul_tma_store")
    assert step(dict(block_n=128, pingpong=True, tma_store=False))["kernel"] == "persistent_matmul_pingpong"
    assert step(dict(stages=3)) == dict(stages=3, kernel="persistent_matmul")
    assert step(dict(kernel="persistent_matmul", stages=3)) == dict(kernel="persistent_matmul", stages=3)
    with pytest.raises(ValueError, match="no step has both"):
        step(dict(pingpong=True, tma_store=True))
    tma = dict(block_m=128, block_n=256, group=8, stages=4, pingpong=False, tma_store=True)
    assert cuda_of(nb08.hopper_kernel(*SMALL, 132, **step(tma))) == cuda_of(
        nb08.persistent_matmul_tma_store(*SMALL, 132, block_n=256, group=8, stages=4))


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
        kernel, dtype = ladder_kernel(nb08, (m, n, k), step), LADDER[step][1].get("out_dtype", "float32")
    ex, dev = helpers.build(kernel, "sm_90a", tir_pipeline="tirx"), helpers.device()
    args = [tvm.runtime.tensor(x, dev) for x in (a, b, np.full((m, n), np.nan, dtype))]  # C poisoned: all written?
    ex.mod["main"](*args)
    c = args[2].numpy()
    expected = a.astype("float64") @ b.astype("float64")
    assert np.abs(c.astype("float64") - expected).max() / np.abs(expected).max() < (2e-3 if dtype == "float16" else 1e-4)
