"""Notebook 11 (FlashAttention on Hopper) on the CPU: the instructions its kernels are written with,
as the generated CUDA shows them (wgmma fed by TMA, the register hand-over between warpgroups, two
products in flight and ping-pong in the overlapped step); ptxas keeping every step's wgmma
asynchronous (no serialization warning, no spills); the work items a persistent grid walks; causal
loops stopping at the diagonal; clear errors for shapes the tiles do not take; and the exercise."""


import pytest

import helpers
from test_exercises import run_exercise, solution

NB = "11_flash_attention_hopper"
EXERCISE = "consumer_registers = ..."
SOLUTION = solution(NB, "## 8. Exercise")


@pytest.fixture(scope="module")
def nb11():
    """The notebook's kernels and macros (its exported cells, built on notebook 10's)."""
    return helpers.lessons.lesson(NB)


def cuda(kernel, arch="sm_90a"):
    return helpers.build(kernel, arch, tir_pipeline="tirx").mod.imports[0].inspect_source()


def test_the_hopper_kernel_is_wgmma_fed_by_tma(nb11):
    src = cuda(nb11.hopper_flash_attention(16, 1024, 128), "sm_90a")
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16" in src
    assert "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes" in src
    assert "setmaxnreg.dec.sync.aligned.u32 40" in src and "setmaxnreg.inc.sync.aligned.u32 232" in src
    # P V takes P from registers: wgmma's register form has four 32-bit A operands before B's descriptor
    assert "{%64, %65, %66, %67}" in src or "{%64,%65,%66,%67}" in src.replace(" ", "")


def test_the_overlapped_kernel_keeps_two_products_in_flight(nb11):
    src = cuda(nb11.hopper_flash_attention(16, 1024, 128, False, nb11.consume_overlapped), "sm_90a")
    assert "wgmma.wait_group.sync.aligned 1;" in src  # S done, P V still running: the softmax meanwhile
    assert "bar.sync" in src and "bar.arrive" in src  # ping-pong: the two consumers issue in turn
    plain = cuda(nb11.hopper_flash_attention(16, 1024, 128), "sm_90a")
    assert "wgmma.wait_group.sync.aligned 1;" not in plain and "bar.arrive" not in plain


@pytest.mark.skipif(helpers.kernels.nvcc_path() is None, reason="ptxas' report needs nvcc")
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("step", ["plain", "overlapped", "persistent"])
def test_ptxas_keeps_every_hopper_step_asynchronous(nb11, step, causal):
    """What step 2's prose says: ptxas serializes wgmma (C7512/C7514) or ignores setmaxnreg (C7507)
    when the code does not let it keep them; then the kernel also spills. None of the steps does."""
    consume, blocks = {"plain": (nb11.consume, None), "overlapped": (nb11.consume_overlapped, None),
                       "persistent": (nb11.consume_overlapped, 132)}[step]
    ex = helpers.build(nb11.hopper_flash_attention(16, 1024, 128, causal, consume, blocks), "sm_90a", tir_pipeline="tirx")
    report = helpers.kernels.compile_with_nvcc(ex, "sm_90a", "report")
    assert "Potential Performance Loss" not in report, report[-600:]
    assert "0 bytes spill stores, 0 bytes spill loads" in report


@pytest.mark.parametrize("causal", [False, True])
def test_the_work_items_cover_each_head_and_row_block_once(nb11, causal):
    heads, row_blocks, seq = 3, 8, 8 * nb11.BR_H
    items = [nb11.work_item(w, row_blocks, seq, causal) for w in range(heads * row_blocks)]
    assert sorted((bh, bx) for bh, bx, _ in items) == [(h, b) for h in range(heads) for b in range(row_blocks)]
    assert all(tiles == (bx + 1 if causal else seq // nb11.BC_H) for _, bx, tiles in items)
    if causal:  # within a head, the longest rows first
        assert [bx for bh, bx, _ in items[:row_blocks]] == list(range(row_blocks - 1, -1, -1))


@pytest.mark.parametrize("consume", ["consume", "consume_overlapped"])
def test_causal_kernels_stop_at_the_diagonal(nb11, consume):
    """The causal kernel's tile loops run to the diagonal (bounds that depend on the block), the full
    one's over the whole sequence; the mask's compare appears only in the causal kernel."""
    full, causal = (cuda(nb11.hopper_flash_attention(16, 1024, 64, c, getattr(nb11, consume))) for c in (False, True))
    assert "-3.402823e+38" in causal and "-3.402823e+38" not in full  # T.min_value("float32"): the mask
    assert "blockIdx.x" in causal.split("for (int j", 1)[1].split(";", 2)[1]
    assert "blockIdx.x" not in full.split("for (int j", 1)[1].split(";", 2)[1]


@pytest.mark.parametrize("call, message", [
    (lambda m: m.hopper_flash_attention(16, 4160, 64),
     "sequence length 4160 is not a multiple of the 128-token tiles: pad it to 4224 and mask the padded keys"),
    (lambda m: m.hopper_flash_attention(16, 4096, 256), "head dimension 256 is not supported"),
])
def test_shapes_the_tiles_do_not_take_are_refused(nb11, call, message):
    with pytest.raises(ValueError, match=message):
        call(nb11)


def test_the_exercise_with_its_solution(tmp_path, capsys):
    out = run_exercise(tmp_path, capsys, NB, ["helpers.start("], EXERCISE, SOLUTION)
    assert out.startswith("correct: 152 registers per consumer thread"), out


@pytest.mark.parametrize("answer, hint", [
    ("consumer_registers = 232", "count 128 threads per warpgroup"),
    ("consumer_registers = 157", "multiples of 8"),
    ("consumer_registers = 144", "more does too"),
    ("consumer_registers = ...", "Exercise: not attempted yet"),
])
def test_the_exercise_rejects_wrong_answers(tmp_path, capsys, answer, hint):
    out = run_exercise(tmp_path, capsys, NB, ["helpers.start("], EXERCISE, answer)
    assert hint in out and not out.startswith("correct"), out
