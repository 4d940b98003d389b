"""Notebooks 07 and 08's checked exercises, run with their published solutions (they must say
correct) and with plausible wrong answers (they must not), on the CPU: each builds the kernel
with the student's numbers (or, in 07's exercise 3, the student's TMA copy) for sm_90a and
assembles it. On a Hopper GPU exercise 3 also runs the student's copy and compares the box with B."""


import pytest

from test_exercises import _one, run_exercise, solution

NB07, NB08 = "07_hopper_wgmma_tma", "08_hopper_persistent_kernel"
START = ["helpers.start("]  # the session and what the notebook decides from it; the kernels are exported
STAGES = "max_stages_256 = ..."
BYTES = "bytes_256 = ..."
BOX = "def load_b_box("
RUN07 = 'HOPPER = nb.supports("wgmma + TMA", "as a build for sm_90a")\nRUN = nb.live and HOPPER'
TILES = "block_m, block_n = ..., ..."


def test_07_the_bytes_of_a_k_step(tmp_path, capsys):
    solved = run_exercise(tmp_path, capsys, NB07, START, BYTES, solution(NB07, "**1.**"))
    assert solved.startswith("correct: 43 versus 32 multiply-adds per byte"), solved
    for wrong in ("bytes_256, bytes_128 = 128 * 64 + 64 * 256, 128 * 64 + 64 * 128", "bytes_256, bytes_128 = ..., ..."):
        assert run_exercise(tmp_path, capsys, NB07, START, BYTES, wrong).startswith("not yet"), wrong


BOX_SOLUTION = solution(NB07, "**3.**")
BOX_WRONG = {
    "the coordinates outermost first": BOX_SOLUTION.replace("col, k * BK,", "k * BK, col,"),
    "the row in k steps, not elements": BOX_SOLUTION.replace("col, k * BK,", "col, k,"),
    "no bytes expected": "\n".join(line for line in BOX_SOLUTION.splitlines() if "expect_tx" not in line),
    "half the bytes": BOX_SOLUTION.replace("T.uint32(BK * 64 * 2)", "T.uint32(BK * 64)"),
    "two copies": BOX_SOLUTION + "\n" + BOX_SOLUTION.splitlines()[-1],
}


def test_07_the_tma_copy_of_a_box_of_b(tmp_path, capsys):
    out = run_exercise(tmp_path, capsys, NB07, START, BOX, BOX_SOLUTION, extra=RUN07)
    assert out.strip().splitlines()[-1].startswith("correct: the "), out
    assert "B[128:192, 192:256]" in out, out


@pytest.mark.parametrize("wrong", BOX_WRONG)
def test_07_the_tma_copy_refuses_wrong_boxes(tmp_path, capsys, wrong):
    assert BOX_WRONG[wrong] != BOX_SOLUTION, "a wrong answer that is the solution: the notebook's text moved"
    out = run_exercise(tmp_path, capsys, NB07, START, BOX, BOX_WRONG[wrong], extra=RUN07)
    assert "\nnot yet: " in "\n" + out and "correct" not in out, out


def test_07_the_tma_copy_says_when_it_is_not_written(tmp_path, capsys):
    cell = _one(NB07, BOX)
    out = run_exercise(tmp_path, capsys, NB07, START, BOX, cell[:cell.index("\n\n")], extra=RUN07)
    assert out.strip().splitlines()[-1] == "not yet: fill in load_b_box (where the `...` is)", out


# exercise: (the notebook, its cell's first line, what that cell needs defined, [(answer, what the check says first)])
NUMBERS = {
    "07 stages": (NB07, STAGES, "M = N = K = 4096", [
        (solution(NB07, "**2.**"), "correct: 4 and 7 stages, both kernels assemble for sm_90a"),
        ("max_stages_256, max_stages_128 = 5, 7", "not yet: 5 stages of 128 x 256 do not fit"),
        ("max_stages_256, max_stages_128 = 3, 7", "not yet: more than 3 stages of 128 x 256 fit"),
        ("max_stages_256, max_stages_128 = 4, 6", "not yet: more than 6 stages of 128 x 128 fit"),
        ("max_stages_256, max_stages_128 = ..., ...", "not yet: "),
    ]),
    "08 tiles": (NB08, TILES, "", [  # 08's exports import 07's kernel
        (solution(NB08, "## 6. Exercise"), "correct: 256 tiles of 64 x 64; the kernel assembles for sm_90a"),
        ("block_m, block_n = 128, 256", "not yet: 32 tiles of 128 x 256 leave SMs idle"),
        ("block_m, block_n = 64, 128", "not yet: 128 tiles of 64 x 128 leave SMs idle"),
        ("block_m, block_n = 64, 32", "not yet: 64 x 64 tiles are enough too"),
        ("block_m, block_n = ..., ...", "not yet: "),
    ]),
}


@pytest.mark.parametrize("notebook, cell, extra, answer, says", [
    pytest.param(notebook, cell, extra, answer, says, id=f"{exercise}: {says}")
    for exercise, (notebook, cell, extra, cases) in NUMBERS.items() for answer, says in cases])
def test_07_08_the_numbers_of_a_kernel(tmp_path, capsys, notebook, cell, extra, answer, says):
    """07: the stages of 128 x 256 and 128 x 128 tiles that fit shared memory; 08: tiles enough for every SM."""
    assert run_exercise(tmp_path, capsys, notebook, START, cell, answer, extra=extra).startswith(says)
