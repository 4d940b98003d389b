"""Notebook 06's write-a-design-space exercise, run with its published solution (it must say right)
and with plausible wrong answers (they must not), on the CPU: see tests/test_exercises.py."""

import pytest

from test_exercises import run_exercise, solution

NB06 = "06_metaschedule_tuning"
CONTEXT = ["helpers.start("]
MARKER = "space = None  # your template"

FIXED = """
def space(sch):
    i, j, k = sch.get_loops(sch.get_sblock("C"))
    i0, i1 = sch.split(i, [None, 8])
    j0, j1 = sch.split(j, [None, 8])
    sch.reorder(i0, j0, k, i1, j1)
"""
DRAWN_NOT_USED = """
def space(sch):
    i, j, k = sch.get_loops(sch.get_sblock("C"))
    sch.sample_perfect_tile(i, n=2, max_innermost_factor=16)
    sch.sample_perfect_tile(j, n=2, max_innermost_factor=16)
    i0, i1 = sch.split(i, [None, 8])
    j0, j1 = sch.split(j, [None, 8])
    sch.reorder(i0, j0, k, i1, j1)
"""
NOT_REORDERED = """
def space(sch):
    i, j, k = sch.get_loops(sch.get_sblock("C"))
    i0, i1 = sch.split(i, sch.sample_perfect_tile(i, n=2, max_innermost_factor=16))
    j0, j1 = sch.split(j, sch.sample_perfect_tile(j, n=2, max_innermost_factor=16))
"""
ONLY_I = """
def space(sch):
    i, j, k = sch.get_loops(sch.get_sblock("C"))
    i0, i1 = sch.split(i, sch.sample_perfect_tile(i, n=2, max_innermost_factor=16))
    j0, j1 = sch.split(j, [None, 8])
    sch.reorder(i0, j0, k, i1, j1)
"""


@pytest.mark.parametrize("answer, ok", [
    (solution(NB06, "Write a design space"), True),
    (FIXED, False),  # no sample at all
    (DRAWN_NOT_USED, False),  # samples drawn, the loops still split by 8
    (NOT_REORDERED, False),  # k left outside the tiles' inner loops
    (ONLY_I, False),  # j still fixed
])
def test_06_write_a_design_space(tmp_path, capsys, answer, ok):
    out = run_exercise(tmp_path, capsys, NB06, CONTEXT, MARKER, answer)
    assert out.startswith("correct") == ok and ("not right" in out) != ok, out


def test_06_design_space_blank_answer_says_so(tmp_path, capsys):
    out = run_exercise(tmp_path, capsys, NB06, CONTEXT, MARKER, "space = None")
    assert out.strip() == "Exercise 2: not answered yet"
