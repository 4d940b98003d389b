"""The write-a-step exercises of notebooks 03 and 04, run on the CPU with their published solution
(the check must say right) and with plausible wrong answers (it must not).

As in test_exercises.py, the exercise cell runs as committed with its answer lines (everything
before its first blank line) replaced by an answer; the definitions it needs are the notebook's own
functions and constants, taken from its code cells by name (the cells that define them also
measure, which these tests leave out)."""

import pytest

import helpers
from test_exercises import _one, run_cell, solution

NB03 = "03_matmul_local_blocking"
NB04 = "04_matmul_shared_blocking"
LIVE = type("nb", (), {"live": False})  # no GPU: the checks that run a kernel are skipped


def run_step_exercise(tmp_path, capsys, notebook, names, marker, answer):
    """Run the exercise cell holding `marker` with `answer` as its answer lines, after the lesson's
    exports (which must hold `names`); return what it printed, or 'AssertionError: ...' if a check failed."""
    exports = vars(helpers.lessons.lesson(notebook))
    assert set(names) <= set(exports), f"{notebook} exports no {sorted(set(names) - set(exports))}"
    return run_cell(tmp_path, capsys, exports | {"nb": LIVE}, _one(notebook, marker), answer)


# ------------------------------------------------------------------ 03: a step of your own, A in registers

MARKER03 = "Exercise 3: not attempted yet"
NAMES03 = {"matmul_module", "local_blocking", "unroll_tile", "zero_first", "RECT", "MLC_TILES"}
STAGE_A = solution(NB03, "Write a step of your own")
STAGE_A_WRONG = {
    "B, not A": STAGE_A.replace("sch.cache_read(blk, 0,", "sch.cache_read(blk, 1,"),
    "at k1, not k0": STAGE_A.replace("sch.get_loops(blk)[-4]", "sch.get_loops(blk)[-3]"),
    "scalar loads": STAGE_A.replace("    _, vec = sch.split(sch.get_loops(a_local)[-1], [None, 4])\n    sch.vectorize(vec)\n", ""),
    "float2 loads": STAGE_A.replace("[None, 4]", "[None, 2]"),
    "both operands": STAGE_A.replace("    a_local = sch.cache_read(blk, 0, \"local\")",
                                     "    sch.compute_at(sch.cache_read(blk, 1, \"local\"), sch.get_loops(blk)[-4])\n"
                                     "    a_local = sch.cache_read(blk, 0, \"local\")"),
}


@pytest.mark.parametrize("wrong", [None, *STAGE_A_WRONG], ids=lambda w: w or "solution")
def test_03_stage_a_only(tmp_path, capsys, wrong):
    answer = STAGE_A_WRONG[wrong] if wrong else STAGE_A
    assert wrong is None or answer != STAGE_A, "a wrong answer that is the solution: the notebook's text moved"
    out = run_step_exercise(tmp_path, capsys, NB03, NAMES03, MARKER03, answer)
    assert ("Exercise 3: right" in out) == (wrong is None), out


def test_03_blank_answer_says_so(tmp_path, capsys):
    blank = _one(NB03, MARKER03).split("\n\n")[0]
    assert run_step_exercise(tmp_path, capsys, NB03, NAMES03, MARKER03, blank).strip() == MARKER03


# ------------------------------------------------------------------ 04: a step of your own, three stages

MARKER04 = "Exercise 3: not attempted yet"
NAMES04 = {"matmul_module", "schedule", "tile_block", "loop", "unroll_tile", "zero_first", "shared_tiles", "stage_in_shared",
           "cooperative_fetch", "shared_kernel", "stage_in_registers", "pad_rows", "interleaved", "padded_ik", "pipeline",
           "async_copies", "transpose_a", "transposed", "RECT", "ASYNC"}
THREE = solution(NB04, "Write a step of your own")
THREE_WRONG = {
    "two stages": THREE.replace("[0, 0, 2]", "[0, 0, 1]"),
    "four stages": THREE.replace("[0, 0, 2]", "[0, 0, 3]"),
    "synchronous copies": THREE.replace('    sch.annotate(loop(sch, 6), "software_pipeline_async_stages", [0])\n', ""),
    "the t_k = 16 tiles": THREE.replace("(8, 8, 16, 16, 8)", "(8, 8, 16, 16, 16)"),
    "the library's steps, two stages": "my_sch = zero_first(async_copies(pipeline(padded_ik(schedule(RECT), (8, 8, 16, 16, 8)))))",
}
LIBRARY = "my_sch = zero_first(async_copies(pipeline(padded_ik(schedule(RECT), (8, 8, 16, 16, 8)), stages=3)))"


@pytest.mark.parametrize("wrong", [None, "library", *THREE_WRONG], ids=lambda w: w or "solution")
def test_04_three_stages(tmp_path, capsys, wrong):
    answer = {None: THREE, "library": LIBRARY}.get(wrong) or THREE_WRONG[wrong]
    out = run_step_exercise(tmp_path, capsys, NB04, NAMES04, MARKER04, answer)
    assert ("Exercise 3: right" in out) == (wrong in (None, "library")), out


def test_04_three_stages_refuse_a_transposed_tile(tmp_path, capsys):
    with pytest.raises(ValueError, match="cannot transpose"):
        run_step_exercise(tmp_path, capsys, NB04, NAMES04, MARKER04,
                          "my_sch = zero_first(async_copies(pipeline(transposed(schedule(RECT), (8, 8, 16, 16, 8)), stages=3)))")


def test_04_blank_answer_says_so(tmp_path, capsys):
    blank = _one(NB04, MARKER04).split("\n\n")[0]
    assert run_step_exercise(tmp_path, capsys, NB04, NAMES04, MARKER04, blank).strip() == MARKER04
