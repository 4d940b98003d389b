"""Notebooks 07 and 08's checked exercises, run with their published solutions (they must say
correct) and with plausible wrong answers (they must not), on the CPU: each builds the kernel
with the student's numbers for sm_90a and assembles it."""


import pytest

from test_exercises import run_exercise, solution

NB07, NB08 = "07_hopper_wgmma_tma", "08_hopper_persistent_kernel"
START = ["helpers.start("]  # the session and what the notebook decides from it; the kernels are exported
STAGES = "max_stages_256 = ..."
TILES = "block_m, block_n = ..., ..."


def run_07(tmp_path, capsys, answer):
    return run_exercise(tmp_path, capsys, NB07, START, STAGES, answer, extra="M = N = K = 4096")


def run_08(tmp_path, capsys, answer):
    """run_exercise for 08's cell, after its exports (which import 07's kernel)."""
    return run_exercise(tmp_path, capsys, NB08, START, TILES, answer)


@pytest.mark.parametrize("answer, says", [
    (solution(NB07, "**2.**"), "correct: 4 and 7 stages, both kernels assemble for sm_90a"),
    ("max_stages_256, max_stages_128 = 5, 7", "not yet: 5 stages of 128 x 256 do not fit"),
    ("max_stages_256, max_stages_128 = 3, 7", "not yet: more than 3 stages of 128 x 256 fit"),
    ("max_stages_256, max_stages_128 = 4, 6", "not yet: more than 6 stages of 128 x 128 fit"),
    ("max_stages_256, max_stages_128 = ..., ...", "not yet: "),
])
def test_07_the_stages_that_fit_shared_memory(tmp_path, capsys, answer, says):
    assert run_07(tmp_path, capsys, answer).startswith(says)


@pytest.mark.parametrize("answer, says", [
    (solution(NB08, "## 6. Exercise"), "correct: 256 tiles of 64 x 64; the kernel assembles for sm_90a"),
    ("block_m, block_n = 128, 256", "not yet: 32 tiles of 128 x 256 leave SMs idle"),
    ("block_m, block_n = 64, 128", "not yet: 128 tiles of 64 x 128 leave SMs idle"),
    ("block_m, block_n = 64, 32", "not yet: 64 x 64 tiles are enough too"),
    ("block_m, block_n = ..., ...", "not yet: "),
])
def test_08_tiles_enough_for_every_sm(tmp_path, capsys, answer, says):
    assert run_08(tmp_path, capsys, answer).startswith(says)
