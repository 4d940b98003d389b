"""Notebook 09 (reductions) on the CPU: its exercise with the published solution and with wrong
answers; the computations themselves (the online softmax's running rescale, Welford in each lane and
Chan across lanes), run unscheduled on LLVM against float64 NumPy, masked and large logits
included; the two steps between the fused softmax and its 16-byte stores; the copy sizes that fit
in L2; and the clear errors for rows its schedules cannot cut."""


import numpy as np
import pytest
import tvm

import helpers
from helpers import reduction_tables
from test_exercises import _one, run_exercise, solution

NB = "09_reductions"
CONTEXT = ["helpers.start(", "def row_sum("]
EXERCISE = "Exercise: not attempted yet"
SOLUTION = solution(NB, "## 7. Exercise")


@pytest.fixture(scope="module")
def nb09():
    """The notebook's computations, row plan and references (its exported cells)."""
    return helpers.lessons.lesson(NB)


def run_on_cpu(mod, *arrays):
    """Run an unscheduled row module on LLVM; return its last argument (the output)."""
    ex = tvm.compile(mod, target="llvm")
    tensors = [tvm.runtime.tensor(a) for a in arrays]
    ex["main"](*tensors)
    return tensors[-1].numpy()


@pytest.mark.parametrize("dtype, tol", [("float32", 1e-6), ("float16", 2e-3)])
def test_the_online_softmax_is_the_softmax(nb09, dtype, tol):
    x = nb09.logits(8, 256, dtype)  # row 0 masked with -inf, row 1 far beyond exp's fp16 range
    assert np.isneginf(x[0, ::7]).all() and x[1].min() > 40
    for lanes in (1, 32, 256):
        y = run_on_cpu(nb09.online_softmax(8, 256, lanes, dtype), x, np.empty_like(x))
        expected = nb09.softmax_ref(x)
        assert np.isfinite(y).all() and (y[0, ::7] == 0).all()
        assert np.abs(y.astype(np.float64) - expected).max() < tol, lanes


def test_the_three_pass_softmax_agrees(nb09):
    x = nb09.logits(8, 256, "float32")
    y = run_on_cpu(nb09.softmax(8, 256, "float32"), x, np.empty_like(x))
    assert np.abs(y - nb09.softmax_ref(x)).max() < 1e-6


@pytest.mark.parametrize("dtype, tol", [("float32", 1e-5), ("float16", 3e-3)])
def test_welford_and_chan_give_the_layer_norm(nb09, dtype, tol):
    x, w, b = nb09.layer_norm_inputs(8, 512, dtype)  # a mean of 20 against a spread of 3
    expected = nb09.layer_norm_ref(x, w, b)
    for lanes in (1, 16, 512):
        y = run_on_cpu(nb09.layer_norm(8, 512, lanes, dtype), x, w, b, np.empty_like(x))
        err = np.abs(y.astype(np.float64) - expected).max() / np.abs(expected).max()
        assert err < tol, (lanes, err)


def test_welford_beats_the_sum_of_squares_where_the_mean_is_large(nb09):
    """Why the notebook uses Welford: E[x^2] - E[x]^2 in float32 loses the variance of a row whose
    mean is 10^4 times its spread; the lanes' running means and M2 keep it."""
    x = (np.random.default_rng(0).standard_normal((4, 4096)) * 0.1 + 1000).astype("float32")
    w, b = np.ones(4096, "float32"), np.zeros(4096, "float32")
    expected = nb09.layer_norm_ref(x, w, b)
    y = run_on_cpu(nb09.layer_norm(4, 4096, 128, "float32"), x, w, b, np.empty_like(x))
    mean = x.mean(axis=1, dtype=np.float32, keepdims=True)
    naive_var = (x * x).mean(axis=1, dtype=np.float32, keepdims=True) - mean**2
    naive = (x - mean) / np.sqrt(np.maximum(naive_var, 0) + 1e-5)
    assert np.abs(naive - expected).max() > 0.1  # the one-pass sum of squares is visibly off
    assert np.abs(y - expected).max() < 1e-2


@pytest.mark.parametrize("n, dtype, plan", [
    (128, "float16", (16, 8, 8)), (256, "float16", (32, 4, 8)), (512, "float16", (32, 4, 8)),
    (1024, "float16", (32, 4, 8)), (2048, "float16", (128, 1, 8)), (4096, "float16", (128, 1, 8)), (8192, "float16", (256, 1, 8)),
    (32768, "float16", (512, 1, 8)), (4096, "float32", (256, 1, 4)), (64, "float32", (16, 8, 4)),
])
def test_the_plan_for_each_row_length(nb09, n, dtype, plan):
    lanes, rows, vector = nb09.plan(n, dtype)
    assert (lanes, rows, vector) == plan
    assert n % (lanes * vector) == 0 and lanes * rows >= 128 and lanes * rows <= 512


@pytest.mark.parametrize("call, message", [
    (lambda m: m.plan(1000, "float16"), r"threads x vector factor 256 does not divide the extent 1000"),
    (lambda m: m.plan(1001, "float16"), "a row of 1001 float16 values cannot be cut into 16-byte vectors"),
    (lambda m: m.plan(8, "float16"), "at least 16"),
    (lambda m: m.plan(4096, "int8"), "rows of float16 or float32, not 'int8'"),
    (lambda m: m.softmax(64, 64, "bfloat16"), "softmax takes float16 or float32 rows, not 'bfloat16'"),
    (lambda m: m.online_softmax(64, 100, 32), "lanes"),
    (lambda m: m.layer_norm(64, 100, 32), "lanes"),
])
def test_rows_the_schedules_cannot_cut_are_refused(nb09, call, message):
    with pytest.raises(ValueError, match=message):
        call(nb09)


# The exercise builds its rows of 128 with the notebook's `row_sum`; run from a file other than the
# one defining `row_sum`, TVMScript could not find the class's source, so the context builds that
# module first and `row_sum` hands it out.
SHORT_ROWS = """
_row_sum, _short = row_sum, row_sum(16384, 128)
def row_sum(M, N):
    return _short if (M, N) == (16384, 128) else _row_sum(M, N)
"""


def test_the_exercise_with_its_solution(tmp_path, capsys):
    assert "Exercise: right" in run_exercise(tmp_path, capsys, NB, CONTEXT, EXERCISE, SOLUTION, extra=SHORT_ROWS)


@pytest.mark.parametrize("wrong", [
    SOLUTION.replace("[None, 4]", "[None, 8]"),  # 8 rows per block
    SOLUTION.replace("[None, 32]", "[None, 64]"),  # 2 elements per thread, 64 threads
    SOLUTION.replace('    sch.bind(ty, "threadIdx.y")\n', ""),  # rows left serial
])
def test_the_exercise_refuses_wrong_schedules(tmp_path, capsys, wrong):
    out = run_exercise(tmp_path, capsys, NB, CONTEXT, EXERCISE, wrong, extra=SHORT_ROWS)
    assert "Exercise: right" not in out, out


def test_the_exercise_says_when_it_is_not_attempted(tmp_path, capsys):
    cell = _one(NB, EXERCISE)
    out = run_exercise(tmp_path, capsys, NB, CONTEXT, EXERCISE, cell[:cell.index("\n\n")], extra=SHORT_ROWS)
    assert out.strip() == EXERCISE


# ------------------------------------------------------------------ the softmax ladder: fusion, then 16-byte stores

def test_the_fusion_stores_one_value_at_a_time_and_the_next_step_16_bytes(nb09):
    """Step 2 (`fused`) writes each thread's 8 outputs one fp16 at a time; step 3 (`one_kernel`) adds only the
    register copy and its vectorized store: the CUDA of step 3 stores Y through uint4, step 2's never does."""
    mod = nb09.softmax(64, 1024)
    fused, stored = helpers.cuda_source(nb09.fused(mod, 128)), helpers.cuda_source(nb09.one_kernel(mod, 128))
    assert "*(uint4*)(Y_ptr" not in fused and fused.count("Y_ptr[") == 8
    assert "*(uint4*)(Y_ptr" in stored and "Y_ptr[" not in stored
    assert stored.count("__syncthreads") == fused.count("__syncthreads")  # the same reductions, the same barriers


@pytest.mark.parametrize("n, stride", [(128, 144), (256, 272)])
def test_the_staged_rows_are_padded_past_their_length(nb09, n, stride):
    """`padded` (section 5): the staged rows are 16 fp16 values (32 bytes) longer than the row, so at 128, where a
    warp holds two rows, the second row's reads fall on other banks; the stores into the stage stay 16-byte aligned."""
    import re

    m, (lanes, rows, vector) = 64 * 1024 // n, reduction_tables.plan(n, "float16")
    for mod in (nb09.online_softmax(m, n, lanes), nb09.layer_norm(m, n, lanes)):
        cuda = helpers.cuda_source(nb09.padded(nb09.row_in_shared(nb09.one_kernel(mod, lanes, rows, vector), lanes, rows,
                                                                   vector)))
        strides = set(re.findall(r"X_shared_dyn_ptr \+ \(+\(int\)threadIdx\.y\) \* (\d+)\)", cuda))
        assert strides == {str(stride)} and stride * 2 % 16 == 0, strides


@pytest.mark.skipif(not helpers.gpu_available(), reason="no CUDA GPU visible to TVM")
@pytest.mark.parametrize("rows, lanes", [(1, 128), (4, 32)])
def test_each_step_of_the_ladder_computes_the_softmax(nb09, rows, lanes):
    x = nb09.logits(64, 1024)
    for step in (nb09.fused, nb09.one_kernel):
        for mod in (nb09.softmax(64, 1024), nb09.online_softmax(64, 1024, lanes)):
            y = helpers.run(step(mod, lanes, rows), [x, np.empty_like(x)])
            assert np.abs(y.astype(np.float64) - nb09.softmax_ref(x)).max() < 2e-3, (step.__name__, rows, lanes)


# ------------------------------------------------------------------ the plumbing in helpers.reduction_tables

def test_the_copy_sizes_say_which_fit_in_l2():
    """Only the copy of 2^22 floats (32 MiB moved) fits in the H100's 50 MiB L2: the one above the DRAM's peak."""
    lines = reduction_tables.copy_sizes().splitlines()
    fitting = [line.split(":")[0] for line in lines if "fits in L2" in line]
    assert fitting == ["copy 2^22 floats float4"], lines
    assert lines[-1] == "NVIDIA H100 80GB HBM3: L2 50 MiB, DRAM peak 3,352 GB/s (data sheet)"
    assert float(lines[1].split("us")[1].split("GB/s")[0].replace(",", "")) > 3352  # L2, not DRAM
