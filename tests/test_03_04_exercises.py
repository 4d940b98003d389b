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


MARKER = "Exercise 3: not attempted yet"  # in both notebooks, exercise 3 writes a step of your own
NAMES = {  # what each lesson's exports must hold for its exercise
    NB03: {"matmul_module", "local_blocking", "unroll_tile", "zero_first", "RECT", "MLC_TILES"},
    NB04: {"matmul_module", "schedule", "tile_block", "loop", "unroll_tile", "zero_first", "shared_tiles", "stage_in_shared",
           "cooperative_fetch", "shared_kernel", "stage_in_registers", "pad_rows", "interleaved", "padded_ik", "pipeline",
           "async_copies", "transpose_a", "transposed", "RECT", "ASYNC"},
}


def run_step_exercise(tmp_path, capsys, notebook, answer):
    """Run the notebook's exercise cell (the one holding MARKER) with `answer` as its answer lines, after the
    lesson's exports (which must hold its NAMES); return what it printed, or 'AssertionError: ...' if a check failed."""
    exports, names = vars(helpers.lessons.lesson(notebook)), NAMES[notebook]
    assert set(names) <= set(exports), f"{notebook} exports no {sorted(set(names) - set(exports))}"
    return run_cell(tmp_path, capsys, exports | {"nb": LIVE}, _one(notebook, MARKER), answer)


SOLUTION = {notebook: solution(notebook, "Write a step of your own") for notebook in (NB03, NB04)}


def one_change(notebook, changes):
    """{wrong answer: the notebook's solution with one change}, from {wrong answer: (the text, what it becomes)}."""
    return {wrong: SOLUTION[notebook].replace(text, becomes) for wrong, (text, becomes) in changes.items()}


# ------------------------------------------------------------------ 03: a step of your own, A in registers

STAGE_A_WRONG = one_change(NB03, {
    "B, not A": ("sch.cache_read(blk, 0,", "sch.cache_read(blk, 1,"),
    "at k1, not k0": ("sch.get_loops(blk)[-4]", "sch.get_loops(blk)[-3]"),
    "scalar loads": ("    _, vec = sch.split(sch.get_loops(a_local)[-1], [None, 4])\n    sch.vectorize(vec)\n", ""),
    "float2 loads": ("[None, 4]", "[None, 2]"),
    "both operands": ('    a_local = sch.cache_read(blk, 0, "local")',
                      '    sch.compute_at(sch.cache_read(blk, 1, "local"), sch.get_loops(blk)[-4])\n'
                      '    a_local = sch.cache_read(blk, 0, "local")'),
})


# ------------------------------------------------------------------ 04: a step of your own, three stages

LIBRARY = "my_sch = zero_first(async_copies(pipeline(padded_ik(schedule(RECT), (8, 8, 16, 16, 8)), stages=3)))"
THREE_WRONG = one_change(NB04, {
    "two stages": ("[0, 0, 2]", "[0, 0, 1]"),
    "four stages": ("[0, 0, 2]", "[0, 0, 3]"),
    "synchronous copies": ('    sch.annotate(loop(sch, 6), "software_pipeline_async_stages", [0])\n', ""),
    "the t_k = 16 tiles": ("(8, 8, 16, 16, 8)", "(8, 8, 16, 16, 16)"),
}) | {"the library's steps, two stages": LIBRARY.replace(", stages=3", "")}

# notebook: (its right answers, its wrong answers); the first right answer is the published solution
ANSWERS = {NB03: ({"solution": SOLUTION[NB03]}, STAGE_A_WRONG),
           NB04: ({"solution": SOLUTION[NB04], "library": LIBRARY}, THREE_WRONG)}


@pytest.mark.parametrize("notebook, answer, right", [
    pytest.param(notebook, answer, right, id=f"{notebook[:2]}: {case}")
    for notebook, (rights, wrongs) in ANSWERS.items()
    for right, answers in ((True, rights), (False, wrongs)) for case, answer in answers.items()])
def test_03_04_a_step_of_your_own(tmp_path, capsys, notebook, answer, right):
    """03: stage A in registers; 04: three pipeline stages (the library's own steps are right too)."""
    assert right or answer != ANSWERS[notebook][0]["solution"], "a wrong answer that is the solution: the notebook's text moved"
    out = run_step_exercise(tmp_path, capsys, notebook, answer)
    assert ("Exercise 3: right" in out) == right, out


@pytest.mark.parametrize("notebook", [NB03, NB04], ids=lambda n: n[:2])
def test_03_04_blank_answer_says_so(tmp_path, capsys, notebook):
    blank = _one(notebook, MARKER).split("\n\n")[0]
    assert run_step_exercise(tmp_path, capsys, notebook, blank).strip() == MARKER


def test_04_three_stages_refuse_a_transposed_tile(tmp_path, capsys):
    with pytest.raises(ValueError, match="cannot transpose"):
        run_step_exercise(tmp_path, capsys, NB04,
                          "my_sch = zero_first(async_copies(pipeline(transposed(schedule(RECT), (8, 8, 16, 16, 8)), stages=3)))")
